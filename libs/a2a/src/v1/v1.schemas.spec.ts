import { describe, expect, it } from 'vitest';
import { fastV1SendMessageRequest, V1SendMessageRequestSchema } from './v1.schemas.js';

const msg = (over: Record<string, unknown> = {}) => ({ messageId: 'm-1', role: 'ROLE_USER', parts: [{ text: 'hi' }], ...over });

/** The fast check answers exactly what the schema parses, or leaves the input to the schema. */
describe('fastV1SendMessageRequest', () => {
  const taken: unknown[] = [
    { message: msg() },
    { message: msg({ role: 1 }) },
    { message: msg({ contextId: 'c-1', taskId: 't-1' }) },
    { message: msg({ contextId: '', taskId: '' }) },
    { message: msg({ parts: [{ text: '' }, { text: 'b', metadata: { k: 1 }, mediaType: 'text/plain', filename: 'a.txt' }] }) },
    { message: msg({ metadata: { a: { b: [1] } }, extensions: ['urn:x'], referenceTaskIds: ['t-0'] }) },
    { message: msg(), configuration: { returnImmediately: true } },
    { message: msg(), configuration: { returnImmediately: false, historyLength: 0, acceptedOutputModes: ['text/plain'] } },
    { message: msg(), configuration: {}, metadata: { x: 'y' }, tenant: 'acme' },
  ];
  it.each(taken.map((p, i) => [i, p]))('input %i: the value the schema parses', (_i, params) => {
    const fast = fastV1SendMessageRequest(params);
    expect(fast).toBeDefined();
    expect(fast).toEqual(V1SendMessageRequestSchema.parse(params));
  });

  const left: unknown[] = [
    null,
    [],
    'x',
    {},
    { message: null },
    { message: msg({ role: 'ROLE_AGENT' }) },
    { message: msg({ messageId: '' }) },
    { message: msg({ parts: [] }) },
    { message: msg({ parts: [{ text: 'a', raw: 'AA==' }] }) },
    { message: msg({ parts: [{ data: { a: 1 } }] }) },
    { message: msg({ parts: [{ text: 'a', mediaType: '' }] }) },
    { message: msg({ parts: [{ text: 'a', kind: 'text' }] }) },
    { message: msg({ message_id: 'snake' }) },
    { message: msg({ contextId: null }) },
    { message: msg({ extensions: [1] }) },
    { message: msg(), configuration: { historyLength: '3' } },
    { message: msg(), configuration: { historyLength: -1 } },
    { message: msg(), configuration: { historyLength: 1.5 } },
    { message: msg(), configuration: { return_immediately: true } },
    { message: msg(), configuration: { taskPushNotificationConfig: { url: 'https://example.com/hook' } } },
    { message: msg(), unknown: 1 },
    { message: msg(), metadata: [] },
    { message: msg(), tenant: 3 },
  ];
  it.each(left.map((p, i) => [i, p]))('input %i: left to the schema', (_i, params) => {
    expect(fastV1SendMessageRequest(params)).toBeUndefined();
  });
});
