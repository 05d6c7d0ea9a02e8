import pg from 'pg';
import fs from 'node:fs';
const c = new pg.Client({ connectionString: 'postgresql://postgres@127.0.0.1:5432/' + (process.argv[2] ?? 'aaas_lead') });
await c.connect();
const { rows: runs } = await c.query('SELECT id, org_id FROM runs ORDER BY id DESC LIMIT 1');
const r = runs[0];
const sql = fs.readFileSync('/tmp/views.sql', 'utf8');
for (const mode of ['force_custom_plan', 'force_generic_plan']) {
  await c.query(`SET plan_cache_mode = ${mode}`);
  await c.query('DEALLOCATE ALL');
  await c.query(`PREPARE v(uuid[], uuid, int, boolean) AS ${sql}`);
  const args = `ARRAY['${r.id}']::uuid[], '${r.org_id}'::uuid, NULL, true`;
  const t = performance.now();
  for (let i = 0; i < 200; i++) await c.query(`EXECUTE v(${args})`);
  console.log(mode, ((performance.now() - t) / 200).toFixed(3), 'ms/call');
  const plan = await c.query(`EXPLAIN (ANALYZE, BUFFERS) EXECUTE v(${args})`);
  console.log(plan.rows.map((x) => x['QUERY PLAN']).join('\n'));
}
await c.end();
