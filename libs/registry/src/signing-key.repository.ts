import { Injectable } from '@nestjs/common';
import { DatabaseService } from '#libs/db';

export interface SigningKeyRow {
  id: string;
  orgId: string;
  kid: string;
  alg: string;
  publicJwk: Record<string, unknown>;
  privateKeyEnc: string;
  status: 'active' | 'retired';
  createdAt: Date;
  retiredAt: Date | null;
}

const COLUMNS = `id, org_id AS "orgId", kid, alg, public_jwk AS "publicJwk", private_key_enc AS "privateKeyEnc", status,
  created_at AS "createdAt", retired_at AS "retiredAt"`;

/** The `signing_keys` table; every query scoped by org (or by the org's slug for the public JWKS). */
@Injectable()
export class SigningKeyRepository {
  constructor(private readonly db: DatabaseService) {}

  async insert(row: Omit<SigningKeyRow, 'status' | 'createdAt' | 'retiredAt'>): Promise<SigningKeyRow> {
    const rows = await this.db.query<SigningKeyRow>(
      `INSERT INTO signing_keys (id, org_id, kid, alg, public_jwk, private_key_enc) VALUES ($1, $2, $3, $4, $5::jsonb, $6) RETURNING ${COLUMNS}`,
      [row.id, row.orgId, row.kid, row.alg, JSON.stringify(row.publicJwk), row.privateKeyEnc],
    );
    return rows[0]!;
  }

  list(orgId: string): Promise<SigningKeyRow[]> {
    return this.db.query<SigningKeyRow>(`SELECT ${COLUMNS} FROM signing_keys WHERE org_id = $1 ORDER BY created_at`, [orgId]);
  }

  active(orgId: string): Promise<SigningKeyRow[]> {
    return this.db.query<SigningKeyRow>(`SELECT ${COLUMNS} FROM signing_keys WHERE org_id = $1 AND status = 'active' ORDER BY created_at`, [orgId], 'signing_keys.active');
  }

  /** Active keys of the organization with this slug (public JWKS). */
  activeBySlug(orgSlug: string): Promise<SigningKeyRow[]> {
    return this.db.query<SigningKeyRow>(
      `SELECT ${COLUMNS.replaceAll(/(^|,\s*)([a-z_]+)/g, '$1k.$2')} FROM signing_keys k JOIN organizations o ON o.id = k.org_id
        WHERE o.slug = $1 AND k.status = 'active' ORDER BY k.created_at`,
      [orgSlug],
    );
  }

  /**
   * Retire a key. `{ ok: false, reason: 'not_found' }` when the org has no such key; `'last_signing'`
   * when it is the org's last active key and a servable agent of the org (its active published
   * revision) declares `signedAgentCard`: its card would lose every signature. One statement: the
   * org's active keys are locked first (a concurrent retire of another key is waited for and
   * re-read), so two retires can never leave such a card with no key.
   */
  async retire(orgId: string, id: string): Promise<{ ok: true; row: SigningKeyRow } | { ok: false; reason: 'not_found' | 'last_signing' }> {
    const rows = await this.db.query<SigningKeyRow & { blocked: boolean }>(
      `WITH locked AS (SELECT id FROM signing_keys WHERE org_id = $1 AND status = 'active' FOR UPDATE),
            guard AS (
              SELECT NOT EXISTS (SELECT 1 FROM locked WHERE id <> $2)
                 AND EXISTS (SELECT 1 FROM locked WHERE id = $2)
                 AND EXISTS (SELECT 1 FROM agents a JOIN agent_revisions r ON r.id = a.active_revision_id AND r.status = 'published'
                              WHERE a.org_id = $1 AND r.org_id = $1 AND r.protocol_profiles #>> '{a2a,capabilities,signedAgentCard}' = 'true') AS blocked),
            upd AS (
              UPDATE signing_keys SET status = 'retired', retired_at = COALESCE(retired_at, now())
               WHERE org_id = $1 AND id = $2 AND NOT (SELECT blocked FROM guard)
              RETURNING ${COLUMNS})
       SELECT upd.*, false AS blocked FROM upd
       UNION ALL
       SELECT ${COLUMNS.replaceAll(/(^|,\s*)([a-z_]+)/g, '$1k.$2')}, true AS blocked FROM signing_keys k WHERE k.org_id = $1 AND k.id = $2 AND (SELECT blocked FROM guard)`,
      [orgId, id],
    );
    const row = rows[0];
    if (!row) return { ok: false, reason: 'not_found' };
    if (row.blocked) return { ok: false, reason: 'last_signing' };
    const { blocked: _, ...key } = row;
    return { ok: true, row: key };
  }
}
