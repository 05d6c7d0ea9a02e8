import { Injectable } from '@nestjs/common';
import { DatabaseService } from '#libs/db';

/** A runtime secret without its value (what listings show). */
export interface RuntimeSecretRow {
  name: string;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

const COLUMNS = `name, version, created_at AS "createdAt", updated_at AS "updatedAt"`;

/**
 * The `runtime_secrets` table ((org_id, name) primary key, ciphertext, version). Every query is
 * scoped by org_id; the ciphertext is read by `ciphertext` only (the resolver) and never listed.
 */
@Injectable()
export class RuntimeSecretRepository {
  constructor(private readonly db: DatabaseService) {}

  /**
   * Insert a secret unless the org has one of that name (`exists`) or has `max` secrets already
   * (`full`, with how many it has). One transaction under the organization's advisory lock, so
   * concurrent creations cannot pass `max` together.
   */
  async insert(orgId: string, name: string, ciphertext: string, max: number): Promise<RuntimeSecretRow | { refused: 'exists' } | { refused: 'full'; count: number }> {
    return this.db.transaction(async (q) => {
      await q(`SELECT pg_advisory_xact_lock(hashtextextended('aaas.runtime-secrets:' || $1, 0))`, [orgId]);
      const rows = await q<RuntimeSecretRow & { count: number }>(
        `WITH n AS (SELECT count(*)::int AS count FROM runtime_secrets WHERE org_id = $1),
              ins AS (
                INSERT INTO runtime_secrets (org_id, name, ciphertext) SELECT $1, $2, $3 FROM n WHERE n.count < $4
                ON CONFLICT (org_id, name) DO NOTHING RETURNING ${COLUMNS})
         SELECT ins.*, n.count FROM n LEFT JOIN ins ON true`,
        [orgId, name, ciphertext, max],
      );
      const row = rows[0]!;
      if (row.name !== null) return { name: row.name, version: row.version, createdAt: row.createdAt, updatedAt: row.updatedAt };
      // the name is checked first: a name that exists is a conflict whatever the count
      const [taken] = await q<{ taken: boolean }>(`SELECT EXISTS (SELECT 1 FROM runtime_secrets WHERE org_id = $1 AND name = $2) AS taken`, [orgId, name]);
      return taken!.taken ? { refused: 'exists' } : { refused: 'full', count: row.count };
    });
  }

  /** A new value, version + 1. Null when the org has no such secret. */
  async rotate(orgId: string, name: string, ciphertext: string): Promise<RuntimeSecretRow | null> {
    const rows = await this.db.query<RuntimeSecretRow>(
      `UPDATE runtime_secrets SET ciphertext = $3, version = version + 1, updated_at = now() WHERE org_id = $1 AND name = $2 RETURNING ${COLUMNS}`,
      [orgId, name, ciphertext],
    );
    return rows[0] ?? null;
  }

  list(orgId: string): Promise<RuntimeSecretRow[]> {
    return this.db.query<RuntimeSecretRow>(`SELECT ${COLUMNS} FROM runtime_secrets WHERE org_id = $1 ORDER BY name`, [orgId]);
  }

  /** False when the org has no such secret. */
  async delete(orgId: string, name: string): Promise<boolean> {
    const rows = await this.db.query<{ name: string }>(`DELETE FROM runtime_secrets WHERE org_id = $1 AND name = $2 RETURNING name`, [orgId, name]);
    return rows.length > 0;
  }

  /** The stored ciphertext and its version; null when the org has no such secret. */
  async ciphertext(orgId: string, name: string): Promise<{ ciphertext: string; version: number } | null> {
    const rows = await this.db.query<{ ciphertext: string; version: number }>(
      `SELECT ciphertext, version FROM runtime_secrets WHERE org_id = $1 AND name = $2`,
      [orgId, name],
      'runtime_secrets.ciphertext',
    );
    return rows[0] ?? null;
  }

  /**
   * The organization's id and slug (what its namespace of worker variables is derived from, with
   * the operator's mapping; see secretEnvOwner); null when `orgId` is no organization.
   */
  async organization(orgId: string): Promise<{ id: string; slug: string } | null> {
    const rows = await this.db.query<{ id: string; slug: string }>(`SELECT id::text AS id, slug FROM organizations WHERE id = $1::uuid`, [orgId], 'runtime_secrets.organization');
    return rows[0] ?? null;
  }
}
