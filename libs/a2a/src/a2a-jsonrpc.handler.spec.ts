import { Logger } from '@nestjs/common';
import { describe, expect, it } from 'vitest';
import { AppError } from '#libs/common';
import type { ResolvedA2AAgent } from '#libs/registry';
import { A2AError, toA2AError } from './a2a.errors.js';
import { A2AJsonRpcHandler, negotiateVersion } from './a2a-jsonrpc.handler.js';
import type { A2AOperations } from './a2a-operations.service.js';
import { A2AStreams } from './a2a-streams.service.js';
import type { RunStreamHub, RunViews } from '#libs/runs';
import { mediaTypeAccepted } from './a2a-operations.service.js';
import { A2APushService } from './push/a2a-push.service.js';
import type { PushConfigService } from '#libs/push';

/** An agent whose card declares no streaming (the streaming methods must refuse with -32004). */
const agent = { org: { id: 'org-1' }, agent: { id: 'agent-1' }, revision: { a2a: { capabilities: { streaming: false } } } } as ResolvedA2AAgent;

/** A handler whose operations are never reached: every call here fails before them, or GetTask fails with `fail`. */
function handler(fail: unknown = new AppError('run.not_found', 'task x not found', { details: { taskId: 'x' } })) {
  const ops = {
    getTask: async () => {
      throw toA2AError(fail);
    },
  } as unknown as A2AOperations;
  return new A2AJsonRpcHandler(ops, new A2AStreams(ops, {} as RunViews, {} as RunStreamHub), new A2APushService({ enabled: true } as PushConfigService, {} as RunViews));
}

const rpc = (method: string, params: unknown = { id: 'x' }, extra: object = {}) => ({ jsonrpc: '2.0', id: 7, method, params, ...extra });

describe('negotiateVersion', () => {
  it('reads Major.Minor, ignores the patch, and treats absent or empty as 0.3', () => {
    expect(negotiateVersion('1.0')).toBe('1.0');
    expect(negotiateVersion(' 1.0.3 ')).toBe('1.0');
    expect(negotiateVersion('0.3')).toBe('0.3');
    expect(negotiateVersion('0.3.0')).toBe('0.3');
    expect(negotiateVersion(undefined)).toBe('0.3');
    expect(negotiateVersion('')).toBe('0.3');
  });

  it.each(['9.9', '1.1', '2.0', '0.2', 'latest', '1'])('refuses %s with VersionNotSupported', (v) => {
    expect(() => negotiateVersion(v)).toThrow(expect.objectContaining({ type: 'VersionNotSupported', code: -32009 }));
  });
});

describe('A2AJsonRpcHandler', () => {
  it('answers malformed JSON with -32700 and id null', async () => {
    const r = await handler().handle(agent, { body: undefined, malformed: 'Unexpected token', version: '1.0' });
    expect(r).toMatchObject({ id: null, error: { code: -32700, data: [{ reason: 'PARSE_ERROR', domain: 'a2a-protocol.org' }] } });
  });

  it.each([
    [[rpc('GetTask')], null, /batch/],
    ['"hello"', null, /request object/],
    [{ id: 1, method: 'GetTask', params: {} }, 1, /jsonrpc/],
    [{ jsonrpc: '1.0', id: 'a', method: 'GetTask' }, 'a', /jsonrpc/],
    [{ jsonrpc: '2.0', id: 1.5, method: 'GetTask' }, null, /id must be/],
    [{ jsonrpc: '2.0', id: { x: 1 }, method: 'GetTask' }, null, /id must be/],
    [{ jsonrpc: '2.0', id: 3 }, 3, /method/],
    [{ jsonrpc: '2.0', id: 3, method: 'GetTask', params: 'x' }, 3, /params/],
  ])('answers an invalid request %# with -32600', async (body, id, message) => {
    const r = await handler().handle(agent, { body, version: '1.0' });
    expect(r).toMatchObject({ jsonrpc: '2.0', id, error: { code: -32600 } });
    expect((r as { error: { message: string } }).error.message).toMatch(message);
  });

  it('refuses an unsupported version with -32009 in the v1.0 shape, echoing the id', async () => {
    const r = await handler().handle(agent, { body: rpc('SendMessage'), version: '9.9' });
    expect(r).toMatchObject({ id: 7, error: { code: -32009, data: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'VERSION_NOT_SUPPORTED' }] } });
  });

  it('routes by version: v1.0 names under 1.0, v0.3 names without a header', async () => {
    const h = handler();
    expect(await h.handle(agent, { body: rpc('tasks/get'), version: '1.0' })).toMatchObject({ error: { code: -32601 } });
    expect(await h.handle(agent, { body: rpc('GetTask') })).toMatchObject({ error: { code: -32601 } });
    // reached the operation: the stub's TaskNotFound, shaped per version
    expect(await h.handle(agent, { body: rpc('GetTask'), version: '1.0' })).toMatchObject({ error: { code: -32001, data: [{ reason: 'TASK_NOT_FOUND', metadata: { taskId: 'x' } }] } });
    const v03 = await h.handle(agent, { body: rpc('tasks/get') });
    expect(v03).toEqual({ jsonrpc: '2.0', id: 7, error: { code: -32001, message: 'task x not found' } });
  });

  it.each([
    ['1.0', 'SendStreamingMessage', -32004],
    ['1.0', 'SubscribeToTask', -32004],
    ['1.0', 'CreateTaskPushNotificationConfig', -32003],
    ['1.0', 'GetTaskPushNotificationConfig', -32003],
    ['1.0', 'ListTaskPushNotificationConfigs', -32003],
    ['1.0', 'DeleteTaskPushNotificationConfig', -32003],
    ['1.0', 'GetExtendedAgentCard', -32004],
    ['1.0', 'Nope', -32601],
    ['1.0', 'constructor', -32601],
    ['1.0', '__proto__', -32601],
    ['1.0', 'toString', -32601],
    [undefined, 'hasOwnProperty', -32601],
    [undefined, 'message/stream', -32004],
    [undefined, 'tasks/resubscribe', -32004],
    [undefined, 'tasks/pushNotificationConfig/set', -32003],
    [undefined, 'agent/getAuthenticatedExtendedCard', -32004],
    [undefined, 'tasks/list', -32601],
  ])('A2A-Version %s: %s → %i', async (version, method, code) => {
    const r = await handler().handle(agent, { body: rpc(method), version });
    expect(r).toMatchObject({ id: 7, error: { code } });
  });

  it('answers -32602 for missing or invalid params, naming the field', async () => {
    const h = handler();
    expect(await h.handle(agent, { body: { jsonrpc: '2.0', id: 7, method: 'GetTask' }, version: '1.0' })).toMatchObject({ error: { code: -32602, message: 'params must be an object' } });
    const r = await h.handle(agent, { body: rpc('SendMessage', { message: { messageId: 'm', role: 'ROLE_USER', parts: [] } }), version: '1.0' });
    expect(r).toMatchObject({ error: { code: -32602, data: [{ reason: 'INVALID_PARAMS' }] } });
    expect((r as { error: { message: string } }).error.message).toContain('message.parts: a message needs at least one part');
  });

  it('hides internal errors behind a generic message (and logs the cause)', async () => {
    const logged: unknown[] = [];
    Logger.overrideLogger({ log() {}, warn() {}, error: (m: unknown) => void logged.push(m) });
    const r = await handler(new Error('connection refused at 10.0.0.3')).handle(agent, { body: rpc('GetTask'), version: '1.0' });
    expect(r).toMatchObject({ error: { code: -32603, message: 'internal error' } });
    expect(String(logged[0])).toContain('connection refused');
    Logger.overrideLogger(['error', 'warn', 'log']);
  });
});

describe('toA2AError', () => {
  it('maps AppErrors through the registry a2a names', () => {
    expect(toA2AError(new AppError('run.terminal', 't')).code).toBe(-32004);
    expect(toA2AError(new AppError('run.not_cancelable', 't')).code).toBe(-32002);
    expect(toA2AError(new AppError('run.thread_mismatch', 't')).code).toBe(-32602);
    expect(toA2AError(new AppError('internal', 'secret detail')).message).toBe('internal error');
    const e = new A2AError('TaskNotFound', 'x');
    expect(toA2AError(e)).toBe(e);
  });

  it('marks the database being unreachable or silent as unavailable, and nothing already classified', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    expect(toA2AError(refused)).toMatchObject({ type: 'InternalError', unavailable: true });
    expect(toA2AError(new Error('Connection terminated unexpectedly')).unavailable).toBe(true);
    expect(toA2AError(Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' })).unavailable).toBe(true);
    expect(toA2AError(new AppError('service.unavailable', 'x')).unavailable).toBe(true);
    // a protocol violation is a bug; an AppError keeps its own meaning whatever its cause
    expect(toA2AError(Object.assign(new Error('protocol'), { code: '08P01' })).unavailable).toBe(false);
    const refusedPush = new AppError('push.url_refused', 'no such host', { cause: Object.assign(new Error('getaddrinfo ENOTFOUND x.test'), { code: 'ENOTFOUND' }) });
    expect(toA2AError(refusedPush)).toMatchObject({ type: 'InvalidParams', unavailable: false });
  });
});

describe('mediaTypeAccepted', () => {
  it('matches exact types, type wildcards and */*, ignoring parameters and case', () => {
    expect(mediaTypeAccepted('text/plain; charset=utf-8', ['text/plain'])).toBe(true);
    expect(mediaTypeAccepted('image/PNG', ['image/*'])).toBe(true);
    expect(mediaTypeAccepted('application/pdf', ['*/*'])).toBe(true);
    expect(mediaTypeAccepted('application/pdf', ['text/plain', 'image/*'])).toBe(false);
  });
});
