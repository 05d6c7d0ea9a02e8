import { describe, expect, it } from 'vitest';
import { A2A_ERRORS, A2AError, type A2AErrorType } from '../a2a.errors.js';
import type { A2AOperations } from '../a2a-operations.service.js';
import type { A2AStreams } from '../a2a-streams.service.js';
import { A2ARestHandler, queryToProtoJson } from './a2a-rest.handler.js';
import { REST_ERROR_MAPPING, toRestError } from './rest-errors.js';
import { A2A_REST_ROUTES, restPathParams, routerPath } from './rest-routes.js';
import { A2APushService } from '../push/a2a-push.service.js';
import { ANONYMOUS_CALLER } from '../a2a.types.js';
import type { PushConfigService } from '#libs/push';
import type { RunViews } from '#libs/runs';

describe('toRestError', () => {
  it('answers google.rpc.Status JSON with one ErrorInfo, code = HTTP status', () => {
    const r = toRestError(new A2AError('TaskNotFound', 'task x not found', { metadata: { taskId: 'x' } }));
    expect(r).toEqual({
      httpStatus: 404,
      body: {
        error: {
          code: 404,
          status: 'NOT_FOUND',
          message: 'task x not found',
          details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'TASK_NOT_FOUND', domain: 'a2a-protocol.org', metadata: { taskId: 'x' } }],
        },
      },
    });
  });

  // A2A v1.0 §5.4; the same as @a2a-js/sdk@1.3.0 src/errors/rest.ts (REST_ERROR_HTTP_STATUS / REST_ERROR_STATUS_NAME)
  it.each<[A2AErrorType, number, string, string]>([
    ['TaskNotFound', 404, 'NOT_FOUND', 'TASK_NOT_FOUND'],
    ['TaskNotCancelable', 400, 'FAILED_PRECONDITION', 'TASK_NOT_CANCELABLE'],
    ['PushNotificationNotSupported', 400, 'FAILED_PRECONDITION', 'PUSH_NOTIFICATION_NOT_SUPPORTED'],
    ['UnsupportedOperation', 400, 'FAILED_PRECONDITION', 'UNSUPPORTED_OPERATION'],
    ['ContentTypeNotSupported', 400, 'INVALID_ARGUMENT', 'CONTENT_TYPE_NOT_SUPPORTED'],
    ['InvalidAgentResponse', 500, 'INTERNAL', 'INVALID_AGENT_RESPONSE'],
    ['ExtendedAgentCardNotConfigured', 400, 'FAILED_PRECONDITION', 'EXTENDED_AGENT_CARD_NOT_CONFIGURED'],
    ['ExtensionSupportRequired', 400, 'FAILED_PRECONDITION', 'EXTENSION_SUPPORT_REQUIRED'],
    ['VersionNotSupported', 400, 'FAILED_PRECONDITION', 'VERSION_NOT_SUPPORTED'],
    ['InvalidParams', 400, 'INVALID_ARGUMENT', 'INVALID_PARAMS'],
    ['ParseError', 400, 'INVALID_ARGUMENT', 'INVALID_PARAMS'],
    ['InvalidRequest', 400, 'INVALID_ARGUMENT', 'INVALID_PARAMS'],
    ['MethodNotFound', 404, 'NOT_FOUND', 'METHOD_NOT_FOUND'],
    ['InternalError', 500, 'INTERNAL', 'INTERNAL_ERROR'],
    ['Unauthenticated', 401, 'UNAUTHENTICATED', 'UNAUTHENTICATED'],
    ['Unauthorized', 403, 'PERMISSION_DENIED', 'PERMISSION_DENIED'],
  ])('%s → %i %s (%s)', (type, httpStatus, status, reason) => {
    const r = toRestError(new A2AError(type, 'm'));
    expect(r.httpStatus).toBe(httpStatus);
    expect(r.body.error).toMatchObject({ code: httpStatus, status, message: 'm', details: [{ reason }] });
    expect(r.body.error.details[0]).not.toHaveProperty('metadata');
  });

  it('maps every A2A error type, and takes an HTTP status override (415) into error.code', () => {
    expect(Object.keys(REST_ERROR_MAPPING).sort()).toEqual(Object.keys(A2A_ERRORS).sort());
    const r = toRestError(new A2AError('ContentTypeNotSupported', 'no'), 415);
    expect(r).toMatchObject({ httpStatus: 415, body: { error: { code: 415, status: 'INVALID_ARGUMENT', details: [{ reason: 'CONTENT_TYPE_NOT_SUPPORTED' }] } } });
  });
});

describe('queryToProtoJson', () => {
  it('keeps single values as strings, reads booleans, drops empty values', () => {
    expect(queryToProtoJson({ pageSize: '2', contextId: '', includeArtifacts: 'true', include_artifacts: 'false', status: 'TASK_STATE_WORKING' })).toEqual({
      pageSize: '2',
      includeArtifacts: true,
      include_artifacts: false,
      status: 'TASK_STATE_WORKING',
    });
    expect(queryToProtoJson(undefined)).toEqual({});
  });

  it('refuses a repeated parameter and a non-boolean boolean with InvalidParams', () => {
    expect(() => queryToProtoJson({ pageSize: ['1', '2'] })).toThrow(expect.objectContaining({ type: 'InvalidParams', message: 'query parameter pageSize must be given once' }));
    expect(() => queryToProtoJson({ includeArtifacts: '1' })).toThrow(expect.objectContaining({ type: 'InvalidParams', message: 'includeArtifacts must be true or false' }));
  });
});

describe('A2ARestHandler', () => {
  const unreachable = new Proxy({}, { get: () => () => Promise.reject(new Error('must not be reached')) });
  const handler = new A2ARestHandler(unreachable as A2AOperations, unreachable as A2AStreams, new A2APushService({ enabled: true } as PushConfigService, unreachable as RunViews));
  const agent = { revision: { a2a: { capabilities: {} } } } as Parameters<A2ARestHandler['listTasks']>[0];

  it('validates before calling the operations', async () => {
    await expect(handler.sendMessage(agent, [])).rejects.toMatchObject({ type: 'InvalidParams', message: expect.stringContaining('JSON object') });
    await expect(handler.sendMessage(agent, undefined)).rejects.toMatchObject({ type: 'InvalidParams' });
    await expect(handler.sendMessage(agent, {})).rejects.toMatchObject({ type: 'InvalidParams', message: expect.stringContaining('message') });
    await expect(handler.cancelTask(agent, 'x', 'text')).rejects.toMatchObject({ type: 'InvalidParams' });
    await expect(handler.getTask(agent, 'x', { historyLength: '-1' })).rejects.toMatchObject({ type: 'InvalidParams', message: expect.stringContaining('historyLength') });
    await expect(handler.listTasks(agent, { pageSize: '0' })).rejects.toMatchObject({ type: 'InvalidParams', message: expect.stringContaining('pageSize') });
    await expect(handler.listTasks(agent, { status: 'DONE' })).rejects.toMatchObject({ type: 'InvalidParams', message: expect.stringContaining('status') });
  });

  it('push config routes refuse an agent that does not declare push, before anything else', async () => {
    await expect(handler.createPushConfig(agent, 't1', {}, ANONYMOUS_CALLER)).rejects.toMatchObject({ type: 'PushNotificationNotSupported' });
    await expect(handler.listPushConfigs(agent, 't1', {}, ANONYMOUS_CALLER)).rejects.toMatchObject({ type: 'PushNotificationNotSupported' });
    await expect(handler.getPushConfig(agent, 't1', 'c', ANONYMOUS_CALLER)).rejects.toMatchObject({ type: 'PushNotificationNotSupported' });
    await expect(handler.deletePushConfig(agent, 't1', 'c', ANONYMOUS_CALLER)).rejects.toMatchObject({ type: 'PushNotificationNotSupported' });
  });

  it.each([
    ['PUT', 'tasks/t1/pushNotificationConfigs', 'MethodNotFound', undefined],
    ['POST', 'extendedAgentCard', 'MethodNotFound', undefined],
    ['DELETE', 'tasks/t1', 'MethodNotFound', undefined],
    ['GET', 'nothing/here', 'MethodNotFound', undefined],
    ['GET', '', 'MethodNotFound', undefined],
  ])('unmatched %s /%s → %s', (method, path, type, tenant) => {
    const r = handler.unmatched(method, path);
    expect(r.error.type).toBe(type);
    expect(r.tenant).toBe(tenant);
  });
});

describe('the HTTP+JSON route table', () => {
  it('gives the router the paths find-my-way reads: a literal ":" doubled, a parameter before ":" ended by a regexp', () => {
    expect(A2A_REST_ROUTES.map((r) => `${r.method} ${routerPath(r.path)}`)).toEqual([
      'POST /message::send',
      'POST /message::stream',
      'GET /tasks',
      'GET /tasks/:id',
      'POST /tasks/:id([^/:]+)::cancel',
      'GET /tasks/:id([^/:]+)::subscribe',
      'POST /tasks/:id([^/:]+)::subscribe',
      'POST /tasks/:id/pushNotificationConfigs',
      'GET /tasks/:id/pushNotificationConfigs',
      'GET /tasks/:id/pushNotificationConfigs/:configId',
      'DELETE /tasks/:id/pushNotificationConfigs/:configId',
      'GET /extendedAgentCard',
      'POST /extensions/:method',
    ]);
    expect(restPathParams('/tasks/{id}/pushNotificationConfigs/{configId}')).toEqual(['id', 'configId']);
  });

  it('has one operationId per route, and a body mode on every POST', () => {
    expect(new Set(A2A_REST_ROUTES.map((r) => r.operationId)).size).toBe(A2A_REST_ROUTES.length);
    for (const r of A2A_REST_ROUTES) expect(r.method === 'POST', r.operationId).toBe(r.body !== undefined);
  });
});
