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

  /** Null when the org has no such key. */
  async retire(orgId: string, id: string): Promise<SigningKeyRow | null> {
    const rows = await this.db.query<SigningKeyRow>(
      `UPDATE signing_keys SET status = 'retired', retired_at = COALESCE(retired_at, now()) WHERE org_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
      [orgId, id],
    );
    return rows[0] ?? null;
  }
}
