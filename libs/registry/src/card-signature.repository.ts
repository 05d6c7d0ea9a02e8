import { Injectable } from '@nestjs/common';
import type { AgentCardSignature } from '#libs/trust';
import { DatabaseService } from '#libs/db';

/**
 * The `card_signatures` table: the signatures of one card version (`cardDigest`) by one set of
 * keys (`kids`), per organization. Rows never change: the first insert of a version wins, and
 * every instance serves that row. Every query is scoped by org.
 */
@Injectable()
export class CardSignatureRepository {
  constructor(private readonly db: DatabaseService) {}

  /** The stored signatures of this card version by these keys, or null. */
  async find(orgId: string, cardDigest: string, kids: string): Promise<AgentCardSignature[] | null> {
    const rows = await this.db.query<{ signatures: AgentCardSignature[] }>(
      `SELECT signatures FROM card_signatures WHERE org_id = $1 AND card_digest = $2 AND kids = $3`,
      [orgId, cardDigest, kids],
      'card_signatures.find',
    );
    return rows[0]?.signatures ?? null;
  }

  /**
   * Store `signatures` unless the version is stored already; returns what is stored (this
   * instance's, or the one another instance stored first). One statement; a second read only when
   * the winner committed after this statement's snapshot (its row is invisible to the statement).
   */
  async insertOrGet(orgId: string, cardDigest: string, kids: string, signatures: AgentCardSignature[]): Promise<AgentCardSignature[]> {
    const rows = await this.db.query<{ signatures: AgentCardSignature[] }>(
      `WITH ins AS (
         INSERT INTO card_signatures (org_id, card_digest, kids, signatures) VALUES ($1, $2, $3, $4::jsonb)
         ON CONFLICT (org_id, card_digest, kids) DO NOTHING RETURNING signatures)
       SELECT signatures FROM ins
       UNION ALL
       SELECT signatures FROM card_signatures WHERE org_id = $1 AND card_digest = $2 AND kids = $3 AND NOT EXISTS (SELECT 1 FROM ins)`,
      [orgId, cardDigest, kids, JSON.stringify(signatures)],
    );
    return rows[0]?.signatures ?? (await this.find(orgId, cardDigest, kids))!;
  }
}
