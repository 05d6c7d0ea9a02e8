import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { ClientFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import { adminRequest, publishAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * The HTTP edge's authentication limits hold on the gRPC binding too (no binding decides anything
 * the others don't): past an address's budget of failed authentications its further FAILED calls
 * are RESOURCE_EXHAUSTED with retry-after, a valid key from the same address is still served, and
 * one credential failing repeatedly is refused before it is checked.
 */
const BUDGET = 3;
let stack: Stack;
let client: A2AClient;
let key: string;

beforeAll(async () => {
  stack = await startStack({ worker: false, env: { GRPC_PORT: '0', RATE_LIMIT_AUTH_FAILURES_PER_IP: String(BUDGET) } });
  const agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'grpc-limited', transports: ['JSONRPC', 'GRPC'], security: { scheme: 'apiKey' } });
  key = (await adminRequest<{ key: string }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/api-keys', { name: 'caller', scopes: ['a2a:invoke'] })).body.key;
  const card = (await (await fetch(agent.cardUrl)).json()) as Parameters<ClientFactory["createFromAgentCard"]>[0];
  client = await new ClientFactory({ transports: [new GrpcTransportFactory()], preferredTransports: ['GRPC'] }).createFromAgentCard(card);
});
afterAll(async () => {
  await stack?.close();
});

/** The gRPC status code a GetTask of an unknown task ends with, presenting `key`. */
async function statusWith(presented: string): Promise<number> {
  try {
    await client.getTask({ tenant: '', id: randomUUID(), historyLength: undefined }, { serviceParameters: { 'x-api-key': presented } });
    return grpc.status.OK;
  } catch (e) {
    const err = e as { status?: number; code?: number };
    return err.status ?? err.code ?? -1;
  }
}

const wrongKey = () => `aaas_${randomUUID().replace(/-/g, '').slice(0, 8)}_${'b'.repeat(32)}`;

describe('gRPC authentication limits', () => {
  it('past the address budget only failed calls are refused; a valid key is served; a repeatedly failing credential is refused unchecked', async () => {
    for (let i = 0; i < BUDGET; i++) expect(await statusWith(wrongKey())).toBe(grpc.status.UNAUTHENTICATED);
    // the budget is spent: another guess is RESOURCE_EXHAUSTED, not UNAUTHENTICATED
    expect(await statusWith(wrongKey())).toBe(grpc.status.RESOURCE_EXHAUSTED);
    // a valid key from the same address is checked and served (the task is simply unknown)
    expect(await statusWith(key)).toBe(grpc.status.NOT_FOUND);
    expect(await statusWith(key)).toBe(grpc.status.NOT_FOUND);
    // the same wrong credential, again and again: refused before it is checked
    const same = wrongKey();
    const codes: number[] = [];
    for (let i = 0; i < BUDGET + 2; i++) codes.push(await statusWith(same));
    expect(codes.slice(-2)).toEqual([grpc.status.RESOURCE_EXHAUSTED, grpc.status.RESOURCE_EXHAUSTED]);
    expect(await statusWith(key)).toBe(grpc.status.NOT_FOUND);
  });
});
