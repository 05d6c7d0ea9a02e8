import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_DATABASE_URL } from './support/env.js';

/**
 * The schema stays ready for Citus (docs/deploy.md "Past one PostgreSQL"): org_id is the
 * distribution column of every run table, so
 *   - org_id is NOT NULL,
 *   - the primary key and every unique constraint or unique index (partial and expression ones
 *     too) lead with org_id (a unique key Citus can enforce on one shard),
 *   - every foreign key to a run table carries org_id on both sides (co-located tables: the key
 *     check and the cascade stay on the shard).
 * The run tables are derived from the catalog, not listed: every table with a run_id or org_id
 * column, minus the reference tables below. A new table is a run table unless it is added there.
 */

/**
 * Tables that under Citus are reference tables (replicated to every node, no distribution column):
 * small, written rarely (configuration, not traffic), and most of them looked up before the
 * organization is known, by a key that is unique across organizations. Foreign keys from run
 * tables to them are allowed by Citus (runs.agent_id -> agents, runs.revision_id -> agent_revisions).
 */
const REFERENCE_TABLES: Record<string, string> = {
  organizations: 'the organizations themselves (org_id is their id)',
  api_keys: 'authenticated by prefix, unique across organizations, before the organization is known',
  agents: 'configuration, resolved on every request by (org slug, agent slug)',
  agent_revisions: 'configuration, immutable once published',
  protocol_bindings: 'routed by path, unique across organizations, before the organization is known',
  signing_keys: 'JWKS served by kid, unique across organizations',
  card_signatures: 'a cache of Agent Card signatures, a few rows per organization',
  runtime_secrets: 'configuration, a few rows per organization',
  retention_policies: 'configuration, a few rows per organization, read by the retention scan across organizations',
};

/** Run tables the rules do not cover, each with the reason (none: run_events, partitioned, follows them too). */
const KNOWN_EXCEPTIONS: Record<string, string> = {};

/**
 * Run tables without a primary key (every other rule still applies), each with the reason. Citus
 * distributes a table without one.
 */
const NO_PRIMARY_KEY: Record<string, string> = {
  run_counts: 'signed delta rows summed by key (docs/architecture.md "Counting runs"): rows repeat by design, nothing looks one up',
  org_storage: 'signed delta rows of stored bytes summed per organization (docs/deploy.md "Storage quotas"): rows repeat by design, nothing looks one up',
};

/** The run tables the rules must cover at least (a renamed or dropped one must be noticed). */
const EXPECTED_RUN_TABLES = [
  'runs', 'run_events', 'messages', 'artifacts', 'interaction_requests', 'run_links', 'run_dispatches',
  'push_configs', 'push_deliveries', 'idempotency_records', 'run_counts', 'org_storage',
];

type Query = <T extends pg.QueryResultRow>(text: string, values?: unknown[]) => Promise<T[]>;

/** Tables (plain or partitioned, not partitions) of `schema` with a run_id or org_id column. */
async function runTables(q: Query, schema: string): Promise<string[]> {
  const rows = await q<{ table: string }>(
    `SELECT DISTINCT c.relname AS table
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND a.attname IN ('run_id', 'org_id')
      ORDER BY 1`,
    [schema],
  );
  return rows.map((r) => r.table).filter((t) => !(t in REFERENCE_TABLES) && !(t in KNOWN_EXCEPTIONS));
}

/** Every breach of the rules in `schema`'s run tables, one line each (empty: the schema is ready). */
async function violations(q: Query, schema: string): Promise<string[]> {
  const tables = await runTables(q, schema);
  const out: string[] = [];
  const cols = await q<{ table: string; nullable: string }>(
    `SELECT table_name AS table, is_nullable AS nullable FROM information_schema.columns
      WHERE table_schema = $1 AND column_name = 'org_id' AND table_name = ANY($2)`,
    [schema, tables],
  );
  const orgCol = new Map(cols.map((c) => [c.table, c.nullable]));
  for (const t of tables) {
    if (!orgCol.has(t)) out.push(`${t}: no org_id column`);
    else if (orgCol.get(t) !== 'NO') out.push(`${t}: org_id is nullable`);
  }
  // unique indexes (the primary key's and unique constraints' included): org_id must be the first key column
  const uniques = await q<{ table: string; index: string; primary: boolean; first: string | null }>(
    `SELECT c.relname AS table, i.relname AS index, x.indisprimary AS primary,
            (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = x.indrelid AND a.attnum = x.indkey[0]) AS first
       FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = ANY($2) AND x.indisunique`,
    [schema, tables],
  );
  for (const t of tables) if (!(t in NO_PRIMARY_KEY) && !uniques.some((u) => u.table === t && u.primary)) out.push(`${t}: no primary key`);
  for (const u of uniques) {
    if (u.first !== 'org_id') out.push(`${u.table}: ${u.primary ? 'primary key' : 'unique index'} ${u.index} does not lead with org_id`);
  }
  // foreign keys whose referenced table is a run table: org_id on both sides, at the same position
  const fks = await q<{ table: string; name: string; referenced: string; pairs: string[] }>(
    `SELECT c.relname AS table, k.conname AS name, r.relname AS referenced,
            ARRAY(SELECT a.attname || '=' || b.attname
                    FROM unnest(k.conkey, k.confkey) AS p(l, f)
                    JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = p.l
                    JOIN pg_attribute b ON b.attrelid = k.confrelid AND b.attnum = p.f) AS pairs
       FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class r ON r.oid = k.confrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND k.contype = 'f' AND k.conparentid = 0 AND r.relname = ANY($2)`,
    [schema, tables],
  );
  for (const f of fks) {
    if (f.table in REFERENCE_TABLES) out.push(`${f.table}: foreign key ${f.name} from a reference table to the run table ${f.referenced}`);
    else if (!f.pairs.includes('org_id=org_id')) out.push(`${f.table}: foreign key ${f.name} to ${f.referenced} does not carry org_id`);
  }
  return out.sort();
}

describe('schema rules (Citus-ready run tables)', () => {
  let client: pg.Client;
  const q: Query = async (text, values = []) => (await client.query(text, values)).rows;

  beforeAll(async () => {
    client = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await client.connect();
  });
  afterAll(async () => {
    await client.end();
  });

  it('derives the run tables from the catalog: every table with run_id or org_id that is not a reference table', async () => {
    const tables = await runTables(q, 'public');
    expect(tables).toEqual(expect.arrayContaining(EXPECTED_RUN_TABLES));
    // every allow-listed table exists (a stale entry would hide nothing, but says something false)
    const present = await q<{ t: string }>(`SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public'`);
    for (const t of [...Object.keys(REFERENCE_TABLES), ...Object.keys(KNOWN_EXCEPTIONS)]) expect(present.map((p) => p.t)).toContain(t);
  });

  it('the migrated schema keeps every rule: org_id NOT NULL, leading every primary and unique key, in every foreign key between run tables', async () => {
    expect(await violations(q, 'public')).toEqual([]);
    // the keys the application relies on, by name
    const pk = await q<{ def: string }>(`SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'runs_pkey'`);
    expect(pk[0]!.def).toBe('PRIMARY KEY (org_id, id)');
  });

  it('flags a new table that breaks the rules (scratch schema, rolled back)', async () => {
    await client.query('BEGIN');
    try {
      await client.query(`CREATE SCHEMA scratch_rules`);
      // a table that keeps the rules
      await client.query(`CREATE TABLE scratch_rules.runs (org_id uuid NOT NULL, id uuid NOT NULL, PRIMARY KEY (org_id, id))`);
      await client.query(`CREATE TABLE scratch_rules.good_notes (org_id uuid NOT NULL, id uuid NOT NULL, run_id uuid NOT NULL, note text,
                            PRIMARY KEY (org_id, id), UNIQUE (org_id, run_id, note), FOREIGN KEY (org_id, run_id) REFERENCES scratch_rules.runs (org_id, id))`);
      expect(await violations(q, 'scratch_rules')).toEqual([]);
      // and tables that break each rule
      await client.query(`CREATE UNIQUE INDEX runs_id_key ON scratch_rules.runs (id)`);
      await client.query(`CREATE TABLE scratch_rules.bad_notes (id uuid PRIMARY KEY, org_id uuid, run_id uuid REFERENCES scratch_rules.runs (id), note text UNIQUE)`);
      await client.query(`CREATE TABLE scratch_rules.keyless_notes (org_id uuid NOT NULL, run_id uuid NOT NULL)`);
      await client.query(`CREATE UNIQUE INDEX good_notes_run_lower_note_key ON scratch_rules.good_notes (run_id, lower(note)) WHERE note IS NOT NULL`);
      expect(await violations(q, 'scratch_rules')).toEqual([
        'bad_notes: foreign key bad_notes_run_id_fkey to runs does not carry org_id',
        'bad_notes: org_id is nullable',
        'bad_notes: primary key bad_notes_pkey does not lead with org_id',
        'bad_notes: unique index bad_notes_note_key does not lead with org_id',
        'good_notes: unique index good_notes_run_lower_note_key does not lead with org_id',
        'keyless_notes: no primary key',
        'runs: unique index runs_id_key does not lead with org_id',
      ]);
    } finally {
      await client.query('ROLLBACK');
    }
    const left = await q(`SELECT 1 FROM pg_namespace WHERE nspname = 'scratch_rules'`);
    expect(left).toHaveLength(0);
  });
});
