import { Injectable } from '@nestjs/common';
import type { ApiKeyScope } from '#libs/contracts';
import { AppError } from '#libs/common';
import { DatabaseService, translated } from '#libs/db';
import type { NewApiKeyRow } from './organization.repository.js';
import type { ApiKeyInfo } from './registry.types.js';

interface ApiKeyRow {
  id: string;
  orgId: string;
  name: string;
  prefix: string;
  scopes: string[];
  createdAt: Date;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

const toInfo = (row: ApiKeyRow): ApiKeyInfo => ({
  id: row.id,
  orgId: row.orgId,
  name: row.name,
  prefix: row.prefix,
  scopes: row.scopes as ApiKeyScope[],
  createdAt: row.createdAt,
  revokedAt: row.revokedAt,
  lastUsedAt: row.lastUsedAt,
});

/** Data access for `api_keys`. Secret hashes leave this file only through `findByPrefix`. */
@Injectable()
export class ApiKeyRepository {
  constructor(private readonly db: DatabaseService) {}

  /** Errors: `api_key.prefix_taken` when the prefix is taken. */
  async insert(row: NewApiKeyRow): Promise<ApiKeyInfo> {
    return toInfo(await translated(this.db.prisma.apiKey.create({ data: row }), { unique: () => new AppError('api_key.prefix_taken', `API key prefix ${row.prefix} is taken`) }));
  }

  /** The key with that prefix (revoked or not) and its secret hash. Hot path: one named prepared statement. */
  async findByPrefix(prefix: string): Promise<(ApiKeyInfo & { secretHash: string }) | null> {
    const res = await this.db.pool.query<ApiKeyRow & { secretHash: string }>({
      name: 'registry.api_keys.by_prefix',
      text: `SELECT id, org_id AS "orgId", name, prefix, scopes, secret_hash AS "secretHash",
                    created_at AS "createdAt", revoked_at AS "revokedAt", last_used_at AS "lastUsedAt"
               FROM api_keys WHERE prefix = $1`,
      values: [prefix],
    });
    const row = res.rows[0];
    return row ? { ...toInfo(row), secretHash: row.secretHash } : null;
  }

  /** The organization's keys, newest first. */
  async list(orgId: string): Promise<ApiKeyInfo[]> {
    const rows = await this.db.prisma.apiKey.findMany({
      where: { orgId },
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      select: { id: true, orgId: true, name: true, prefix: true, scopes: true, createdAt: true, revokedAt: true, lastUsedAt: true },
    });
    return rows.map(toInfo);
  }

  /** Mark the key revoked (keeping the first revocation time). Null when the org has no such key. */
  async revoke(orgId: string, id: string): Promise<ApiKeyInfo | null> {
    const rows = await this.db.query<ApiKeyRow>(
      `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now())
        WHERE id = $1 AND org_id = $2
        RETURNING id, org_id AS "orgId", name, prefix, scopes, created_at AS "createdAt", revoked_at AS "revokedAt",
                  last_used_at AS "lastUsedAt"`,
      [id, orgId],
    );
    return rows[0] ? toInfo(rows[0]) : null;
  }

  /**
   * Set the key's `last_used_at` to the database's `now()`, unless the key is revoked or its
   * recorded use is younger than `throttleMs` milliseconds (then nothing is written, so processes
   * sharing a key write it about once per interval between them). One statement, no row returned;
   * a missing key is a no-op. Errors: whatever the database raises (unavailable, timed out) —
   * callers off the request path catch them.
   */
  async recordUse(id: string, throttleMs: number): Promise<void> {
    await this.db.query(
      `UPDATE api_keys SET last_used_at = now()
        WHERE id = $1 AND revoked_at IS NULL
          AND (last_used_at IS NULL OR last_used_at < now() - $2::integer * interval '1 millisecond')`,
      [id, throttleMs],
      'registry.api_keys.record_use',
    );
  }
}
