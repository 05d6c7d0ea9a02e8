import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { Redis } from 'ioredis';
import { BenchPostgres, BenchRedis, RedisCounter, SAMPLER_ROLE, SqlCounter, stopOwnServices, withUser } from '../bench/lib/own-services.js';
import { CpuWindow, processTree } from '../bench/lib/proc-cpu.js';

/**
 * The send-message bench's counters (bench/lib/own-services.ts) on their own PostgreSQL cluster
 * and redis-server: statements and commands are counted exactly, the bench's own sampling is left
 * out, and a PostgreSQL backend that exits during a window still counts in the cluster's CPU.
 */
let pgc: BenchPostgres;
let redis: BenchRedis;

beforeAll(async () => {
  pgc = await BenchPostgres.start();
  redis = await BenchRedis.start();
}, 120_000);
afterAll(() => stopOwnServices());

describe('bench counters', () => {
  it('counts every statement of the target (transaction control apart) and none of the sampler', async () => {
    const sql = await SqlCounter.open(withUser(pgc.url('postgres'), SAMPLER_ROLE));
    expect(sql.available).toBe(true);
    const app = new pg.Client({ connectionString: pgc.url('postgres') });
    const sampler = new pg.Client({ connectionString: withUser(pgc.url('postgres'), SAMPLER_ROLE) });
    await app.connect();
    await sampler.connect();
    try {
      await app.query('CREATE TABLE t (id int)');
      await sql.reset();
      await app.query('BEGIN');
      for (let i = 0; i < 5; i++) await app.query('INSERT INTO t VALUES ($1)', [i]);
      await app.query('COMMIT');
      await app.query('/* bench-sampler */ SELECT count(*) FROM t'); // tagged: not counted whoever runs it
      for (let i = 0; i < 3; i++) await sampler.query('SELECT count(*) FROM t');
      const n = await sql.read();
      expect(n).not.toBeNull();
      expect(n!.calls).toBe(7);
      expect(n!.utilityCalls).toBe(2);
      expect(n!.top[0]).toMatchObject({ query: 'INSERT INTO t VALUES ($1)', calls: 5 });
      expect(n!.top[0]!.execMs).toBeGreaterThanOrEqual(0);
      // by time: every counted statement is there, none of the sampler's
      expect(n!.topByTime.map((q) => q.query)).toContain('INSERT INTO t VALUES ($1)');
      expect(n!.topByTime.some((q) => q.query.includes('count(*)'))).toBe(false);
      expect(await sql.read(['no_such_database'])).toMatchObject({ calls: 0 });
    } finally {
      await app.end();
      await sampler.end();
      await sql.close();
    }
  });

  it('counts Redis commands by INFO commandstats deltas, its own INFO left out', async () => {
    const counter = await RedisCounter.open(redis.url);
    const client = new Redis(redis.url);
    try {
      await client.ping(); // connected and ready (ioredis's ready check is an INFO) before the window
      await counter.mark();
      for (let i = 0; i < 4; i++) await client.set(`k${i}`, 'v');
      await client.get('k0');
      await client.eval("return redis.call('INCR', KEYS[1])", 1, 'n');
      const n = await counter.read();
      // 4 SET + 1 GET + 1 EVAL + the INCR the script ran, and nothing else
      expect(n.byCommand).toEqual({ set: 4, get: 1, eval: 1, incr: 1 });
      expect(n.calls).toBe(7);
      expect(n.scriptCalls).toBe(1);
    } finally {
      client.disconnect();
      await counter.close();
    }
  });

  it('keeps the CPU of a backend that exited during the window (reaped by the postmaster)', async () => {
    const cpu = new CpuWindow({ postgres: () => processTree(pgc.pid) });
    cpu.start();
    const c = new pg.Client({ connectionString: pgc.url('postgres') });
    await c.connect();
    // about a second of backend CPU, then the backend exits before the window closes
    await c.query("SELECT count(*) FROM generate_series(1, 3000000) g WHERE md5(g::text) LIKE 'a%'");
    await c.end();
    await new Promise((r) => setTimeout(r, 200));
    expect(cpu.stop().postgres).toBeGreaterThan(200);
  }, 60_000);
});
