import { randomUUID } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { RE2JS } from 're2js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '#libs/config';
import { STRUCTURED_INPUT_EXTENSION_URI } from '#libs/extensions';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { testEnv } from './support/env.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Issue #43, rows 1 and 2: tenant-supplied patterns, schemas and rule sets must not stall a
 * process. Every attack is sent anonymously over A2A JSON-RPC (raw HTTP) to the API, which runs
 * in this process with a worker; two pollers keep a `/healthz` request in flight all along, so a
 * stall of the event loop (the API's or the worker's: one process here) shows as a slow answer.
 * Each attack prints its figures: the slowest /healthz, the event loop's worst delay, RSS growth.
 */
let stack: Stack;
const limits = loadConfig(testEnv());
const SKILLS = [{ id: 's', name: 'S', description: 'd', tags: ['t'] }];
/** Longest /healthz answer allowed while an attack runs (the issue's bar). */
const HEALTHZ_MAX_MS = 100;
/**
 * Tries of an attack beyond the first: the bar is a wall-clock one, and a machine shared with other
 * processes can deschedule the API for more than 100 ms on its own. The defects these tests guard
 * stall for seconds on every try (15.8 s for row 1, 15.6 s for row 2), so a retry never hides them.
 */
const HEALTHZ_RETRIES = 2;
/** RSS growth allowed over one attack (measured here: at most 9 MB; the caches' bounds are in docs/deploy.md). */
const RSS_GROWTH_MAX_MB = 64;

beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.close();
});

/** Keep two /healthz requests in flight until `stop`; the slowest answer, the event loop's worst delay and the RSS growth. */
function watchHealth() {
  let running = true;
  const latencies: number[] = [];
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  const rss0 = process.memoryUsage().rss;
  let failures = 0;
  const poll = async () => {
    while (running) {
      const t0 = performance.now();
      try {
        await (await fetch(`${stack.baseUrl}/healthz`)).arrayBuffer();
      } catch {
        failures++; // a connection the server dropped while it was frozen: the time still counts
      }
      latencies.push(performance.now() - t0);
    }
  };
  const pollers = [poll(), poll()];
  return async () => {
    running = false;
    await Promise.all(pollers);
    delay.disable();
    return {
      healthzMaxMs: Math.round(Math.max(...latencies)),
      polls: latencies.length,
      failures,
      loopDelayMaxMs: Math.round(delay.max / 1e6),
      rssGrowthMb: Math.round((process.memoryUsage().rss - rss0) / 1e6),
    };
  };
}

async function send(a: PublishedAgent, parts: unknown[], headers: Record<string, string> = {}) {
  const res = await fetch(`${stack.baseUrl}${a.basePath}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts } } }),
  });
  return (await res.json()) as { result?: any; error?: { code: number; message: string } };
}

/** POST a draft revision for a fresh agent; the admin API's answer. */
async function draft(body: { extensions?: unknown[]; runtime?: unknown }) {
  const slug = `d-${randomUUID().slice(0, 8)}`;
  const agent = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents', { slug, name: slug, description: 'd' });
  expect(agent.status).toBe(201);
  return adminRequest(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/${slug}/revisions`, {
    protocolProfiles: { a2a: { skillsProjection: SKILLS, ...(body.extensions && { extensions: body.extensions }) } },
    runtime: body.runtime ?? { kind: 'scripted', rules: [] },
  });
}

const structured = (schema: unknown) => [{ uri: STRUCTURED_INPUT_EXTENSION_URI, params: { schema } }];
const ACTIVATE = { 'A2A-Extensions': STRUCTURED_INPUT_EXTENSION_URI };

describe('row 1: the structured-input schema', () => {
  it('row 1: the schema ^(a+)+$ and one anonymous message of 32 × "a" + "!": /healthz stays under 100 ms', { timeout: 120_000, retry: HEALTHZ_RETRIES }, async () => {
    const a = await publishAgent(stack.baseUrl, stack.adminKey, {
      slug: `redos-${randomUUID().slice(0, 6)}`,
      a2a: { extensions: structured({ type: 'object', required: ['s'], properties: { s: { type: 'string', pattern: '^(a+)+$' } } }) },
    });
    const stop = watchHealth();
    const refused = await send(a, [{ data: { s: `${'a'.repeat(32)}!` } }], ACTIVATE);
    const figures = await stop();
    console.log('row 1 (33 characters):', figures);
    expect(refused.error).toMatchObject({ code: -32602, message: expect.stringContaining('must match pattern') });
    expect(figures.healthzMaxMs).toBeLessThan(HEALTHZ_MAX_MS);
    expect(figures.rssGrowthMb).toBeLessThan(RSS_GROWTH_MAX_MB);
    // the pattern still does its job
    expect((await send(a, [{ data: { s: 'aaaa' } }], ACTIVATE)).result?.task).toBeDefined();
  });

  it('the same pattern, ×4 per 2 more characters on a backtracking engine: 33 to 71 characters, then the largest DataPart allowed, then larger data refused before any matching', { timeout: 120_000, retry: HEALTHZ_RETRIES }, async () => {
    const a = await publishAgent(stack.baseUrl, stack.adminKey, {
      slug: `redos-${randomUUID().slice(0, 6)}`,
      a2a: { extensions: structured({ type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } }) },
    });
    const longest = `${'a'.repeat(limits.STRUCTURED_INPUT_DATA_MAX_CHARS - 21)}!`; // {"s":"…"} fills the limit
    const stop = watchHealth();
    for (let n = 32; n <= 70; n += 2) expect((await send(a, [{ data: { s: `${'a'.repeat(n)}!` } }], ACTIVATE)).error?.message).toContain('must match pattern');
    for (let i = 0; i < 5; i++) expect((await send(a, [{ data: { s: longest } }], ACTIVATE)).error?.code).toBe(-32602);
    const over = await send(a, [{ data: { s: `${longest}${'a'.repeat(64)}` } }], ACTIVATE);
    const figures = await stop();
    console.log(`row 1 (20 messages of 33 to 71 characters, 5 of ${longest.length}):`, figures);
    expect(over.error?.code).toBe(-32602);
    expect(over.error?.message).toContain(`at most ${limits.STRUCTURED_INPUT_DATA_MAX_CHARS} (STRUCTURED_INPUT_DATA_MAX_CHARS)`);
    expect(figures.healthzMaxMs).toBeLessThan(HEALTHZ_MAX_MS);
    expect(figures.rssGrowthMb).toBeLessThan(RSS_GROWTH_MAX_MB);
  });

  it('a pattern RE2 cannot run (backreference, lookaround) is refused at draft, naming the field', async () => {
    for (const [schema, field] of [
      [{ type: 'string', pattern: '^(a)\\1$' }, 'schema.pattern'],
      [{ type: 'object', properties: { p: { type: 'string', pattern: '^(?=a)a' } } }, 'schema.properties.p.pattern'],
      [{ type: 'object', patternProperties: { '^(?!x)': { type: 'string' } } }, 'schema.patternProperties.^(?!x)'],
    ] as const) {
      const r = await draft({ extensions: structured(schema) });
      expect(r.status, field).toBe(422);
      expect(r.body.error.code).toBe('request.invalid');
      expect(r.body.error.details.issues[0].path).toBe(`protocolProfiles.a2a.extensions.0.params.${field}`);
      expect(r.body.error.details.issues[0].message).toMatch(/RE2/);
    }
  });

  it('over-budget schemas are refused at draft with the field and the limit: size, depth, nodes, a recursive or exponential $ref, a long pattern', async () => {
    // the issue's 1,000-property schema (65 kB): accepted before, 1.5 s per message
    const properties = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`property_${i}`, { type: 'string', pattern: '^(a+)+$', maxLength: 100 }]));
    const big = await draft({ extensions: structured({ type: 'object', properties }) });
    expect(big.status).toBe(422);
    expect(big.body.error.details.issues[0]).toMatchObject({ path: 'protocolProfiles.a2a.extensions.0.params.schema', message: expect.stringContaining(`at most ${limits.STRUCTURED_INPUT_SCHEMA_MAX_BYTES} bytes`) });

    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < limits.STRUCTURED_INPUT_SCHEMA_MAX_DEPTH; i++) deep = { type: 'object', properties: { x: deep } };
    const tooDeep = await draft({ extensions: structured(deep) });
    expect(tooDeep.status).toBe(422);
    expect(tooDeep.body.error.details.issues[0].message).toContain(`at most ${limits.STRUCTURED_INPUT_SCHEMA_MAX_DEPTH} levels`);

    const wide = Object.fromEntries(Array.from({ length: limits.STRUCTURED_INPUT_SCHEMA_MAX_NODES }, (_, i) => [`p${i}`, { type: 'string' }]));
    const tooMany = await draft({ extensions: structured({ type: 'object', properties: wide }) });
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.error.details.issues[0].message).toContain(`at most ${limits.STRUCTURED_INPUT_SCHEMA_MAX_NODES}`);

    // 2^22 evaluations of one value through 22 small definitions: small on paper, exponential when expanded
    const $defs: Record<string, unknown> = { a22: { type: 'string' } };
    for (let i = 0; i < 22; i++) $defs[`a${i}`] = { anyOf: [{ $ref: `#/$defs/a${i + 1}` }, { $ref: `#/$defs/a${i + 1}` }] };
    const exponential = await draft({ extensions: structured({ $defs, $ref: '#/$defs/a0' }) });
    expect(exponential.status).toBe(422);
    expect(exponential.body.error.details.issues[0].message).toContain(`at most ${limits.STRUCTURED_INPUT_SCHEMA_MAX_NODES}`);

    const recursive = await draft({ extensions: structured({ type: 'object', properties: { next: { $ref: '#' } } }) });
    expect(recursive.status).toBe(422);
    expect(recursive.body.error.details.issues[0]).toMatchObject({ path: 'protocolProfiles.a2a.extensions.0.params.schema.properties.next.$ref', message: expect.stringContaining('recursive') });

    const remote = await draft({ extensions: structured({ $ref: 'https://schemas.example/x.json' }) });
    expect(remote.status).toBe(422);

    const longPattern = await draft({ extensions: structured({ type: 'string', pattern: 'a'.repeat(limits.STRUCTURED_INPUT_PATTERN_MAX_CHARS + 1) }) });
    expect(longPattern.status).toBe(422);
    expect(longPattern.body.error.details.issues[0]).toMatchObject({ path: 'protocolProfiles.a2a.extensions.0.params.schema.pattern', message: expect.stringContaining(`at most ${limits.STRUCTURED_INPUT_PATTERN_MAX_CHARS} characters`) });

    const unbounded = await draft({ extensions: structured({ type: 'array', uniqueItems: true }) });
    expect(unbounded.status).toBe(422);
    expect(unbounded.body.error.details.issues[0]).toMatchObject({ path: 'protocolProfiles.a2a.extensions.0.params.schema.uniqueItems', message: expect.stringContaining('maxItems') });

    // at the limits, accepted
    const fits = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`p${i}`, { type: 'string', pattern: '^[a-z]+$', maxLength: 64 }]));
    expect((await draft({ extensions: structured({ type: 'object', properties: fits, $defs: { d: { type: 'integer' } }, required: ['p0'] }) })).status).toBe(201);
  });

  it('the costliest schema within the budgets, with the most data it accepts: /healthz stays under 100 ms; more data is refused', { timeout: 120_000, retry: HEALTHZ_RETRIES }, async () => {
    // every item is checked against every alternative (an error each) before the last, which it matches
    const alternatives = Math.floor((limits.STRUCTURED_INPUT_SCHEMA_MAX_NODES - 4) / 2);
    const schema = { type: 'array', items: { anyOf: Array.from({ length: alternatives }, (_, i) => ({ const: `v${i}` })) } };
    const nodes = 4 + 2 * alternatives; // one per JSON value: the schema, 'array', items, anyOf, each alternative and its constant
    const a = await publishAgent(stack.baseUrl, stack.adminKey, { slug: `heavy-${randomUUID().slice(0, 6)}`, a2a: { extensions: structured(schema) } });
    const most = Math.floor(limits.STRUCTURED_INPUT_VALIDATION_BUDGET / nodes); // JSON values: the array and its items
    const items = [...Array.from({ length: most - 2 }, () => `v${alternatives - 1}`), 'nothing'];
    const stop = watchHealth();
    for (let i = 0; i < 5; i++) expect((await send(a, [{ data: items }], ACTIVATE)).error?.message).toContain('no DataPart is valid');
    const over = await send(a, [{ data: [...items, 'v0'] }], ACTIVATE);
    const figures = await stop();
    console.log(`row 1 (costliest schema: ${alternatives} alternatives × ${items.length} items, 5 messages):`, figures);
    expect(over.error?.code).toBe(-32602);
    expect(over.error?.message).toContain(`more than ${most} JSON values`);
    expect(figures.healthzMaxMs).toBeLessThan(HEALTHZ_MAX_MS);
    expect(figures.rssGrowthMb).toBeLessThan(RSS_GROWTH_MAX_MB);
  });
});

/** `n` rules whose `match.text` patterns all match `text`, using up to `program` RE2 instructions in all. */
function heavyRules(n: number, program: number): Array<{ match: { text: string }; steps: unknown[] }> {
  const rules: Array<{ match: { text: string }; steps: unknown[] }> = [];
  let left = program;
  for (let i = 0; i < n; i++) {
    // the largest `(?:[a-z]+ ?){1,k}$` that fits this rule's share: it matches the last words only, after scanning the whole text
    const share = Math.floor(left / (n - i));
    let k = 1;
    while (RE2JS.compile(`(?:[a-z]+ ?){1,${k + 1}}$`).programSize() <= share) k++;
    const text = `(?:[a-z]+ ?){1,${k}}$`;
    left -= RE2JS.compile(text).programSize();
    rules.push({ match: { text }, steps: [{ type: 'reply', text: `rule ${i}` }] });
  }
  return rules;
}

describe('row 2: rules × message size', () => {
  it('row 2: a revision over the rule budget (2,000 matching rules) is refused at draft, naming the limit', async () => {
    const rules = Array.from({ length: 2000 }, (_, i) => ({ match: { text: '(?:[a-z]+ ?)+$' }, steps: [{ type: 'reply', text: `rule ${i}` }] }));
    const r = await draft({ runtime: { kind: 'scripted', rules } });
    expect(r.status).toBe(422);
    expect(r.body.error.details.issues[0]).toMatchObject({ path: 'runtime.rules', message: expect.stringContaining(`at most ${limits.SCRIPTED_MAX_RULES} rules`) });
  });

  it('the rule budgets: total RE2 program size and pattern length, each refused at draft with the field and the limit', async () => {
    const program = await draft({ runtime: { kind: 'scripted', rules: heavyRules(limits.SCRIPTED_MAX_RULES, limits.SCRIPTED_RULES_MAX_PROGRAM_SIZE + 200) } });
    expect(program.status).toBe(422);
    expect(program.body.error.details.issues[0]).toMatchObject({ path: 'runtime.rules', message: expect.stringContaining(`at most ${limits.SCRIPTED_RULES_MAX_PROGRAM_SIZE}`) });
    const long = await draft({ runtime: { kind: 'scripted', rules: [{ match: { text: 'a'.repeat(limits.SCRIPTED_PATTERN_MAX_CHARS + 1) }, steps: [{ type: 'reply', text: 'x' }] }] } });
    expect(long.status).toBe(422);
    expect(long.body.error.details.issues[0]).toMatchObject({ path: 'runtime.rules.0.match.text', message: expect.stringContaining(`at most ${limits.SCRIPTED_PATTERN_MAX_CHARS} characters`) });
    const counted = await draft({ runtime: { kind: 'scripted', rules: [{ match: { text: '(?:a?){1000}(?:b?){1000}' }, steps: [{ type: 'reply', text: 'x' }] }] } });
    expect(counted.status).toBe(422);
    expect(counted.body.error.details.issues[0].path).toBe('runtime.rules');
    expect((await draft({ runtime: { kind: 'scripted', rules: heavyRules(limits.SCRIPTED_MAX_RULES, limits.SCRIPTED_RULES_MAX_PROGRAM_SIZE) } })).status).toBe(201);
  });

  it('row 2: a revision at the budgets and anonymous 60 kB messages: /healthz stays under 100 ms (API and worker)', { timeout: 180_000, retry: HEALTHZ_RETRIES }, async () => {
    // rule 0 (not a reply) matches the most, so the API matches every rule, creates a task, and the worker matches them again
    const rules = [{ match: { text: '(?s).*' }, steps: [{ type: 'status', status: 'completed', message: 'done' }] }, ...heavyRules(limits.SCRIPTED_MAX_RULES - 1, limits.SCRIPTED_RULES_MAX_PROGRAM_SIZE - 4)];
    const a = await publishAgent(stack.baseUrl, stack.adminKey, { slug: `rules-${randomUUID().slice(0, 6)}`, runtime: { kind: 'scripted', rules } });
    const text = 'ab '.repeat(20_000);
    {
      const plain = await publishAgent(stack.baseUrl, stack.adminKey, { slug: `plain-${randomUUID().slice(0, 6)}`, runtime: { kind: 'scripted', rules: [{ match: { text: '(?s).*' }, steps: [{ type: 'status', status: 'completed', message: 'done' }] }] } });
      const stopPlain = watchHealth();
      for (let i = 0; i < 5; i++) await send(plain, [{ text }]);
      console.log('baseline: the same messages, one rule:', await stopPlain());
    }
    const stop = watchHealth();
    for (let i = 0; i < 5; i++) {
      const r = await send(a, [{ text }]);
      expect(r.result?.task?.status?.state, JSON.stringify(r.error)).toBe('TASK_STATE_COMPLETED');
    }
    const figures = await stop();
    console.log('row 2 (63 rules at the program budget + 1, 60 kB messages, 5 messages):', figures);
    expect(figures.healthzMaxMs).toBeLessThan(HEALTHZ_MAX_MS);
    expect(figures.rssGrowthMb).toBeLessThan(RSS_GROWTH_MAX_MB);
  });
});
