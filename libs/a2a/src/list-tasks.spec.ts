import { describe, expect, it } from 'vitest';
import { BlockedReasonSchema, RunStatusSchema, type BlockedReason, type RunStatus } from '#libs/contracts';
import { deriveTaskState, type A2ATaskState } from './task-state.js';
import { decodePageToken, encodePageToken, listFingerprint, parseRfc3339, taskStateFilter } from './list-tasks.js';

const SECRET = 'test-page-token-secret';
import { fromV1ListTasksRequest, V1ListTasksRequestSchema } from './v1/v1-list-tasks.js';

const STATES: A2ATaskState[] = [
  'TASK_STATE_SUBMITTED',
  'TASK_STATE_WORKING',
  'TASK_STATE_COMPLETED',
  'TASK_STATE_FAILED',
  'TASK_STATE_CANCELED',
  'TASK_STATE_INPUT_REQUIRED',
  'TASK_STATE_REJECTED',
  'TASK_STATE_AUTH_REQUIRED',
];

/** The SQL predicate of RunViews.list for a filter, evaluated in JS. */
function matches(f: ReturnType<typeof taskStateFilter>, status: RunStatus, blocked: BlockedReason | null): boolean {
  if (f.status && !f.status.includes(status)) return false;
  if (f.blocked === 'none' && blocked !== null) return false;
  if (Array.isArray(f.blocked) && (blocked === null || !f.blocked.includes(blocked))) return false;
  return true;
}

describe('taskStateFilter', () => {
  it('selects exactly the runs deriveTaskState maps to the state (every status × overlay)', () => {
    for (const state of STATES) {
      const f = taskStateFilter(state);
      for (const status of RunStatusSchema.options) {
        for (const blocked of [null, ...BlockedReasonSchema.options]) {
          expect(matches(f, status, blocked), `${state} vs ${status}+${blocked}`).toBe(deriveTaskState(status, blocked) === state);
        }
      }
    }
  });
});

describe('parseRfc3339', () => {
  it.each([
    ['2026-01-31T12:00:00Z', '2026-01-31T12:00:00.000Z'],
    ['2026-01-31t12:00:00.5z', '2026-01-31T12:00:00.500Z'],
    ['2026-01-31T12:00:00.123Z', '2026-01-31T12:00:00.123Z'],
    // sub-millisecond digits round up: status_at (ms) >= result ⟺ status_at >= the instant
    ['2026-01-31T12:00:00.123000000Z', '2026-01-31T12:00:00.123Z'],
    ['2026-01-31T12:00:00.1230001Z', '2026-01-31T12:00:00.124Z'],
    ['2026-01-31T12:00:00.999999Z', '2026-01-31T12:00:01.000Z'],
    ['2026-01-31T14:30:00+02:30', '2026-01-31T12:00:00.000Z'],
    ['2026-01-31T09:00:00-03:00', '2026-01-31T12:00:00.000Z'],
    ['2024-02-29T00:00:00Z', '2024-02-29T00:00:00.000Z'],
  ])('%s → %s', (text, iso) => {
    expect(parseRfc3339(text)?.toISOString()).toBe(iso);
  });

  it.each(['', 'yesterday', '2026-01-31', '2026-01-31 12:00:00Z', '2026-01-31T12:00:00', '2026-13-01T00:00:00Z', '2025-02-29T00:00:00Z', '2026-04-31T00:00:00Z', '2026-01-31T24:00:00Z', '2026-01-31T12:60:00Z', '2026-01-31T12:00:00.1234567890Z', '2026-01-31T12:00:00+24:00', '1700000000'])(
    'refuses %j',
    (text) => {
      expect(parseRfc3339(text)).toBeNull();
    },
  );
});

describe('page tokens', () => {
  const fp = listFingerprint('7e0c3a1e-0000-4000-8000-000000000001', { contextId: 'ctx', state: 'TASK_STATE_WORKING' });
  const last = { statusAt: new Date('2026-01-31T12:00:00.123Z'), id: '0f6c2f0a-51c5-4d36-9e62-2b8f5c2d9a11' };

  it('round-trips the keyset position and is URL-safe', () => {
    const token = encodePageToken(last, fp, SECRET);
    expect(token).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodePageToken(token, fp, SECRET)).toEqual(last);
    expect(decodePageToken(encodePageToken({ statusAt: '2026-01-31T12:00:00.123Z', id: last.id }, fp, SECRET), fp, SECRET)).toEqual(last);
  });

  it('refuses edited, truncated and made-up tokens with InvalidParams', () => {
    const token = encodePageToken(last, fp, SECRET);
    const raw = Buffer.from(token, 'base64url').toString('utf8');
    const edited = Buffer.from(raw.replace('123', '124'), 'utf8').toString('base64url');
    const bad = [
      edited,
      token.slice(0, -4),
      `${token}A`,
      token.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A')),
      'not-a-token',
      Buffer.from(JSON.stringify({ s: '2026-01-01T00:00:00Z', i: last.id })).toString('base64url'),
      'abc+/=',
      'x'.repeat(300),
    ];
    for (const t of bad) {
      expect(() => decodePageToken(t, fp, SECRET), t).toThrow(expect.objectContaining({ type: 'InvalidParams', code: -32602, message: 'pageToken is not a token returned by ListTasks' }));
    }
  });

  it('is signed with the server secret: a token minted with another key is refused', () => {
    const forged = encodePageToken(last, fp, 'somebody-elses-secret-key');
    expect(() => decodePageToken(forged, fp, SECRET)).toThrow(expect.objectContaining({ type: 'InvalidParams', code: -32602 }));
  });

  it('is bound to the agent and the filters, not to pageSize / historyLength / includeArtifacts', () => {
    const token = encodePageToken(last, fp, SECRET);
    const otherFilters = [
      listFingerprint('7e0c3a1e-0000-4000-8000-000000000002', { contextId: 'ctx', state: 'TASK_STATE_WORKING' }),
      listFingerprint('7e0c3a1e-0000-4000-8000-000000000001', { contextId: 'ctx2', state: 'TASK_STATE_WORKING' }),
      listFingerprint('7e0c3a1e-0000-4000-8000-000000000001', { contextId: 'ctx' }),
      listFingerprint('7e0c3a1e-0000-4000-8000-000000000001', { contextId: 'ctx', state: 'TASK_STATE_WORKING', statusTimestampAfter: new Date(0) }),
    ];
    for (const other of otherFilters) {
      expect(() => decodePageToken(token, other, SECRET)).toThrow(expect.objectContaining({ type: 'InvalidParams', message: expect.stringContaining('other filters') }));
    }
  });
});

describe('V1ListTasksRequestSchema', () => {
  const parse = (v: unknown) => V1ListTasksRequestSchema.safeParse(v);

  it('applies the defaults: 50 per page, no artifacts, whole history, no filters', () => {
    const r = parse({});
    expect(r.success && fromV1ListTasksRequest(r.data)).toEqual({ pageSize: 50, includeArtifacts: false });
  });

  it('reads camelCase and snake_case, enum names and numbers, and decimal strings', () => {
    const a = parse({ contextId: 'c', status: 'TASK_STATE_INPUT_REQUIRED', pageSize: 2, pageToken: 't', historyLength: 0, statusTimestampAfter: '2026-01-01T00:00:00Z', includeArtifacts: true });
    const b = parse({ context_id: 'c', status: 6, page_size: '2', page_token: 't', history_length: '0', status_timestamp_after: '2026-01-01T00:00:00Z', include_artifacts: true });
    const expected = { contextId: 'c', state: 'TASK_STATE_INPUT_REQUIRED', pageSize: 2, pageToken: 't', historyLength: 0, statusTimestampAfter: new Date('2026-01-01T00:00:00Z'), includeArtifacts: true };
    expect(a.success && fromV1ListTasksRequest(a.data)).toEqual(expected);
    expect(b.success && fromV1ListTasksRequest(b.data)).toEqual(expected);
  });

  it('treats TASK_STATE_UNSPECIFIED / 0, empty strings and null as "not set"', () => {
    for (const v of [{ status: 'TASK_STATE_UNSPECIFIED' }, { status: 0 }, { status: null }, { contextId: '', pageToken: '' }]) {
      const r = parse(v);
      expect(r.success && fromV1ListTasksRequest(r.data)).toEqual({ pageSize: 50, includeArtifacts: false });
    }
  });

  it.each([
    [{ pageSize: 0 }, 'pageSize'],
    [{ pageSize: 101 }, 'pageSize'],
    [{ pageSize: -1 }, 'pageSize'],
    [{ pageSize: 2.5 }, 'pageSize'],
    [{ pageSize: 'ten' }, 'pageSize'],
    [{ status: 'WORKING' }, 'status'],
    [{ status: 'task_state_working' }, 'status'],
    [{ status: 9 }, 'status'],
    [{ status: true }, 'status'],
    [{ statusTimestampAfter: 'yesterday' }, 'statusTimestampAfter'],
    [{ statusTimestampAfter: 1700000000 }, 'statusTimestampAfter'],
    [{ historyLength: -1 }, 'historyLength'],
    [{ includeArtifacts: 'yes' }, 'includeArtifacts'],
    [{ pageToken: 5 }, 'pageToken'],
  ])('refuses %j (path %s)', (v, path) => {
    const r = parse(v);
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.path).toEqual([path]);
  });
});
