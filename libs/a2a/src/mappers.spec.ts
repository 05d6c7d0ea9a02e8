import { describe, expect, it } from 'vitest';
import { Task as SdkTask, Message as SdkMessage } from '@a2a-js/sdk';
import type { RunView } from '#libs/runs';
import { V1GetTaskRequestSchema, V1SendMessageRequestSchema } from './v1/v1.schemas.js';
import { fromV1SendMessageRequest, toV1SendMessageResponse, toV1Task } from './v1/v1.mapper.js';
import { V03MessageSendParamsSchema } from './v03/v03.schemas.js';
import { fromV03MessageSendParams, toV03Part, toV03Task } from './v03/v03.mapper.js';

const RUN_ID = '5b0e7f7e-8a4b-4c8e-9a51-3f0f0b4c2a11';

function view(over: Partial<RunView['run']> = {}, rest: Partial<Omit<RunView, 'run'>> = {}): RunView {
  return {
    run: {
      id: RUN_ID,
      orgId: 'o',
      agentId: 'a',
      revisionId: 'r',
      threadId: 'ctx-1',
      kind: 'execution',
      status: 'completed',
      blockedReason: null,
      openInteractions: 0,
      interactionVersion: 0,
      createdBy: null,
      lastSequence: 5,
      originMessageId: 'm1',
      metadata: null,
      createdAt: new Date('2026-01-01T00:00:00Z'),
      updatedAt: new Date('2026-01-01T00:00:01Z'),
      // row_to_json hands timestamps back as strings with an offset
      statusAt: '2026-01-01T00:00:01.5+00:00' as unknown as Date,
      openInteractionId: null,
      ...over,
    },
    statusMessage: { messageId: 'm2', role: 'agent', parts: [{ text: 'echo: hi' }] },
    history: [
      { messageId: 'm1', role: 'user', parts: [{ text: 'hi', mediaType: 'text/plain' }] },
      { messageId: 'm2', role: 'agent', parts: [{ text: 'echo: hi' }] },
    ],
    artifacts: [],
    ...rest,
  };
}

describe('v1.0 mapping', () => {
  it('projects a RunView as a ProtoJSON Task: derived state, ids on every message, UTC timestamp, no empty fields', () => {
    const task = toV1Task(view());
    expect(task).toEqual({
      id: RUN_ID,
      contextId: 'ctx-1',
      status: {
        state: 'TASK_STATE_COMPLETED',
        message: { messageId: 'm2', contextId: 'ctx-1', taskId: RUN_ID, role: 'ROLE_AGENT', parts: [{ text: 'echo: hi' }] },
        timestamp: '2026-01-01T00:00:01.500Z',
      },
      history: [
        { messageId: 'm1', contextId: 'ctx-1', taskId: RUN_ID, role: 'ROLE_USER', parts: [{ text: 'hi', mediaType: 'text/plain' }] },
        { messageId: 'm2', contextId: 'ctx-1', taskId: RUN_ID, role: 'ROLE_AGENT', parts: [{ text: 'echo: hi' }] },
      ],
    });
    // what the SDK would serialize for the same object
    expect(SdkTask.toJSON(SdkTask.fromJSON(task))).toEqual(task);
  });

  it('derives input-required from the interaction overlay and carries artifacts and metadata', () => {
    const task = toV1Task(
      view(
        { status: 'working', blockedReason: 'input_required', metadata: { k: 1 } },
        { history: [], artifacts: [{ artifactId: 'a1', name: 'out', parts: [{ data: { x: 1 } }], complete: true }] },
      ),
    );
    expect(task.status.state).toBe('TASK_STATE_INPUT_REQUIRED');
    expect(task.history).toBeUndefined();
    expect(task.artifacts).toEqual([{ artifactId: 'a1', name: 'out', parts: [{ data: { x: 1 } }] }]);
    expect(task.metadata).toEqual({ k: 1 });
  });

  it('wraps SendMessage results in the oneof', () => {
    expect(toV1SendMessageResponse({ kind: 'message', message: { messageId: 'r', role: 'agent', parts: [{ text: 'pong' }] }, contextId: 'c', sequence: 3 })).toEqual({
      message: { messageId: 'r', contextId: 'c', role: 'ROLE_AGENT', parts: [{ text: 'pong' }] },
    });
    expect(SdkMessage.fromJSON({ messageId: 'r', role: 'ROLE_AGENT', parts: [{ text: 'pong' }] }).role).toBe(2);
    expect(toV1SendMessageResponse({ kind: 'task', view: view() })).toHaveProperty('task.id', RUN_ID);
  });

  it('parses SendMessageRequest, with snake_case aliases, nulls as unset and unknown fields ignored', () => {
    const parsed = V1SendMessageRequestSchema.parse({
      message: { message_id: 'm1', role: 'ROLE_USER', parts: [{ text: 'hi', media_type: 'text/plain', filename: '', extra: 1 }], context_id: '', task_id: null },
      configuration: { return_immediately: true, history_length: '2' },
      metadata: { trace: 'x' },
      somethingNew: true,
    });
    const { inbound, options } = fromV1SendMessageRequest(parsed);
    expect(inbound).toEqual({ message: { messageId: 'm1', role: 'user', parts: [{ text: 'hi', mediaType: 'text/plain' }] }, taskId: undefined, contextId: undefined });
    expect(options).toEqual({ returnImmediately: true, historyLength: 2, metadata: { trace: 'x' }, version: '1.0' });
    expect(fromV1SendMessageRequest(V1SendMessageRequestSchema.parse({ message: { messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'x' }] } })).options).toEqual({
      returnImmediately: false,
      version: '1.0',
    });
  });

  it.each([
    [{ messageId: 'm', role: 'ROLE_AGENT', parts: [{ text: 'x' }] }, 'message.role: role must be ROLE_USER'],
    [{ messageId: 'm', role: 'ROLE_USER', parts: [] }, 'message.parts: a message needs at least one part'],
    [{ messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'a', url: 'https://x.test' }] }, 'message.parts.0: a part has exactly one of text, raw, url, data'],
    [{ messageId: 'm', role: 'ROLE_USER', parts: [{ raw: '!!not base64' }] }, 'message.parts.0.raw'],
    [{ role: 'ROLE_USER', parts: [{ text: 'x' }] }, 'message.messageId: messageId is required'],
  ])('rejects a bad message %#', (message, expected) => {
    const r = V1SendMessageRequestSchema.safeParse({ message });
    expect(r.success).toBe(false);
    const text = r.error!.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    expect(text).toContain(expected);
  });

  it('rejects a negative or fractional historyLength', () => {
    expect(V1GetTaskRequestSchema.safeParse({ id: 't', historyLength: -1 }).success).toBe(false);
    expect(V1GetTaskRequestSchema.safeParse({ id: 't', historyLength: 1.5 }).success).toBe(false);
    expect(V1GetTaskRequestSchema.parse({ id: 't', history_length: 0 })).toEqual({ id: 't', historyLength: 0 });
  });
});

describe('v0.3 mapping', () => {
  it('projects a RunView as a kind-tagged Task with kebab-case states', () => {
    const task = toV03Task(view({ status: 'working', blockedReason: 'auth_required' }));
    expect(task).toMatchObject({
      kind: 'task',
      id: RUN_ID,
      contextId: 'ctx-1',
      status: { state: 'auth-required', timestamp: '2026-01-01T00:00:01.500Z', message: { kind: 'message', role: 'agent', taskId: RUN_ID } },
    });
    expect(task.history![0]).toEqual({ kind: 'message', messageId: 'm1', role: 'user', parts: [{ kind: 'text', text: 'hi' }], contextId: 'ctx-1', taskId: RUN_ID });
  });

  it('converts kind-tagged parts to canonical parts and back', () => {
    const parsed = V03MessageSendParamsSchema.parse({
      message: {
        kind: 'message',
        messageId: 'm1',
        role: 'user',
        parts: [
          { kind: 'text', text: 'hi' },
          { kind: 'file', file: { bytes: 'AAEC', mimeType: 'application/octet-stream', name: 'b.bin' } },
          { kind: 'file', file: { uri: 'https://x.test/f.pdf' } },
          { kind: 'data', data: { value: [1, 2] }, metadata: { data_part_compat: true } },
        ],
      },
      configuration: { blocking: false, historyLength: 1 },
    });
    const { inbound, options } = fromV03MessageSendParams(parsed);
    expect(inbound.message.parts).toEqual([
      { text: 'hi' },
      { raw: 'AAEC', mediaType: 'application/octet-stream', filename: 'b.bin' },
      { url: 'https://x.test/f.pdf' },
      { data: [1, 2] },
    ]);
    expect(options).toEqual({ returnImmediately: true, historyLength: 1, version: '0.3' });
    expect(inbound.message.parts.map(toV03Part)).toEqual([
      { kind: 'text', text: 'hi' },
      { kind: 'file', file: { bytes: 'AAEC', mimeType: 'application/octet-stream', name: 'b.bin' } },
      { kind: 'file', file: { uri: 'https://x.test/f.pdf' } },
      { kind: 'data', data: { value: [1, 2] }, metadata: { data_part_compat: true } },
    ]);
  });

  it('is blocking unless blocking is false', () => {
    const msg = { kind: 'message', messageId: 'm', role: 'user', parts: [{ kind: 'text', text: 'x' }] };
    expect(fromV03MessageSendParams(V03MessageSendParamsSchema.parse({ message: msg })).options.returnImmediately).toBe(false);
    expect(fromV03MessageSendParams(V03MessageSendParamsSchema.parse({ message: msg, configuration: {} })).options.returnImmediately).toBe(false);
    expect(fromV03MessageSendParams(V03MessageSendParamsSchema.parse({ message: msg, configuration: { blocking: true } })).options.returnImmediately).toBe(false);
  });

  it('rejects agent messages and unknown part kinds', () => {
    expect(V03MessageSendParamsSchema.safeParse({ message: { messageId: 'm', role: 'agent', parts: [{ kind: 'text', text: 'x' }] } }).success).toBe(false);
    expect(V03MessageSendParamsSchema.safeParse({ message: { messageId: 'm', role: 'user', parts: [{ kind: 'image', url: 'x' }] } }).success).toBe(false);
  });
});
