import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runFuzz } from '../bench/lib/fuzz.js';
import { adminRequest, publishAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Bounded fuzz (fixed seed): 2,000 hostile requests over the JSON-RPC, HTTP+JSON and admin
 * surfaces and run archive imports; none may get a 5xx, a JSON-RPC -32603 or no answer, and memory stays bounded.
 * `npm run fuzz` runs a longer version.
 */
let stack: Stack;
let agentPath: string;
let importKey: string;

beforeAll(async () => {
  stack = await startStack({ env: { RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_PER_IP: '0', RATE_LIMIT_AUTH_FAILURES_PER_IP: '0', A2A_BLOCKING_TIMEOUT_MS: '2000' } });
  const agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'fuzzed', transports: ['JSONRPC', 'HTTP+JSON'], a2a: { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } } });
  agentPath = agent.basePath;
  // an organization with no runs and the same agent: archive imports are fuzzed past "has runs"
  const org = await adminRequest<{ adminKey: { key: string } }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/organizations', { slug: `fuzz-${randomUUID().slice(0, 8)}`, name: 'Fuzz imports' });
  importKey = org.body.adminKey.key;
  await publishAgent(stack.baseUrl, importKey, { slug: 'fuzzed', transports: ['JSONRPC', 'HTTP+JSON'] });
});
afterAll(async () => {
  await stack?.close();
});

describe('fuzz', () => {
  it('2,000 hostile requests: no 5xx, no -32603, no hang, bounded memory', async () => {
    const rssBefore = process.memoryUsage().rss;
    const report = await runFuzz({ baseUrl: stack.baseUrl, adminKey: stack.adminKey, agentPath, importKey }, { count: 2_000, seed: 20261123, concurrency: 8 });
    expect(report.requests).toBe(2_000);
    expect(report.failures, JSON.stringify(report.failures, null, 1)).toEqual([]);
    // the process (API + worker + this test) grew by less than 300 MB over 2,000 requests
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(300 * 1024 * 1024);
    // the fuzz reached the code, not only one error path
    const statuses = Object.keys(report.histogram);
    expect(statuses).toEqual(expect.arrayContaining(['200', '400', '404']));
  }, 120_000);
});
