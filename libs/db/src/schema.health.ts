import { readdirSync } from 'node:fs';
import path from 'node:path';
import { Injectable } from '@nestjs/common';
import pg from 'pg';
import { DatabaseService } from './database.service.js';

/** What the database looks like to this build: reachable, and which migrations are not applied. */
export interface SchemaStatus {
  reachable: boolean;
  /** Migration folders of this build that the database has not applied (empty = up to date). */
  pending: string[];
  /** Why the database could not be reached or read. */
  error?: string;
}

/** The migration folder names this build ships (prisma/migrations, from the working directory). */
export function shippedMigrations(root = process.cwd()): string[] {
  try {
    return readdirSync(path.join(root, 'prisma', 'migrations'), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name)
      .sort();
  } catch {
    return [];
  }
}

async function statusWith(query: (sql: string) => Promise<Array<{ migration_name: string }>>): Promise<SchemaStatus> {
  try {
    const rows = await query(`SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL`);
    const applied = new Set(rows.map((r) => r.migration_name));
    return { reachable: true, pending: shippedMigrations().filter((m) => !applied.has(m)) };
  } catch (e) {
    const code = (e as { code?: string }).code;
    // reachable, but no migrations table at all: nothing is applied
    if (code === '42P01') return { reachable: true, pending: shippedMigrations() };
    return { reachable: false, pending: [], error: e instanceof Error ? e.message || code || 'unreachable' : String(e) };
  }
}

/**
 * Before the app boots: can `databaseUrl` be reached within `timeoutMs`, and is its schema
 * up to date with this build? Used by the API and worker entry points to refuse to start.
 */
export async function checkSchema(databaseUrl: string, timeoutMs = 5_000): Promise<SchemaStatus> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: timeoutMs });
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (e) {
    return { reachable: false, pending: [], error: e instanceof Error ? e.message || (e as { code?: string }).code || 'unreachable' : String(e) };
  }
  try {
    return await statusWith(async (sql) => (await client.query<{ migration_name: string }>(sql)).rows);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Readiness probe of the process's database pool: reachable and migrated (a health indicator's data). */
@Injectable()
export class DatabaseHealth {
  constructor(private readonly db: DatabaseService) {}

  status(): Promise<SchemaStatus> {
    return statusWith((sql) => this.db.query<{ migration_name: string }>(sql));
  }
}
