import { describe, expect, it } from 'vitest';
import { AppError } from './errors.js';
import { isDependencyUnavailable, serviceUnavailable } from './unavailable.js';

/** A pg DatabaseError as the driver raises it (code = SQLSTATE). */
const pgError = (code: string, message = 'boom') => Object.assign(new Error(message), { code, severity: 'ERROR' });
/** Prisma's driver adapter error: the SQLSTATE on its cause, as `originalCode` (and `code` for unmapped kinds). */
const adapterError = (code: string) => Object.assign(new Error('adapter'), { name: 'DriverAdapterError', cause: { kind: 'postgres', code, originalCode: code, message: 'boom' } });
/** An ioredis reply error (redis-errors' ReplyError). */
const replyError = (message: string) => Object.assign(new Error(message), { name: 'ReplyError' });

describe('isDependencyUnavailable', () => {
  it.each([
    ['08006', 'connection_failure'],
    ['08001', 'sqlclient_unable_to_establish_sqlconnection'],
    ['25006', 'read_only_sql_transaction (a hot standby, default_transaction_read_only)'],
    ['25P03', 'idle_in_transaction_session_timeout'],
    ['25P04', 'transaction_timeout'],
    ['53000', 'insufficient_resources'],
    ['53100', 'disk_full'],
    ['53200', 'out_of_memory'],
    ['53300', 'too_many_connections'],
    ['53400', 'configuration_limit_exceeded'],
    ['55P03', 'lock_not_available'],
    ['57000', 'operator_intervention'],
    ['57014', 'query_canceled'],
    ['57P01', 'admin_shutdown'],
    ['57P02', 'crash_shutdown'],
    ['57P03', 'cannot_connect_now'],
    ['57P04', 'database_dropped'],
    ['57P05', 'idle_session_timeout'],
    ['58000', 'system_error'],
    ['58030', 'io_error'],
    ['72000', 'snapshot_too_old'],
  ])('PostgreSQL %s (%s): retry later, from pg and from Prisma', (code) => {
    expect(isDependencyUnavailable(pgError(code))).toBe(true);
    expect(isDependencyUnavailable(adapterError(code))).toBe(true);
    // wrapped by a caller: the cause chain is read
    expect(isDependencyUnavailable(new Error('append failed', { cause: pgError(code) }))).toBe(true);
  });

  it.each([
    ['08P01', 'protocol_violation: a bug'],
    ['23505', 'unique_violation'],
    ['23514', 'check_violation (our triggers)'],
    ['23503', 'foreign_key_violation'],
    ['22P02', 'invalid_text_representation'],
    ['22001', 'string_data_right_truncation'],
    ['42601', 'syntax_error'],
    ['42P01', 'undefined_table'],
    ['40001', 'serialization_failure (retried where it happens)'],
    ['40P01', 'deadlock_detected (retried where it happens)'],
    ['25P02', 'in_failed_sql_transaction: a bug'],
    ['54000', 'program_limit_exceeded: the request is too big'],
    ['55000', 'object_not_in_prerequisite_state'],
    ['58P01', 'undefined_file'],
    ['P0001', 'raise_exception (a trigger refusing the request)'],
    ['XX000', 'internal_error'],
    ['XX001', 'data_corrupted'],
  ])('PostgreSQL %s (%s): not an outage', (code) => {
    expect(isDependencyUnavailable(pgError(code))).toBe(false);
    expect(isDependencyUnavailable(adapterError(code))).toBe(false);
  });

  it('socket errors, pg and pg-pool messages, Prisma codes and adapter kinds', () => {
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EAI_AGAIN']) expect(isDependencyUnavailable(Object.assign(new Error(code), { code }))).toBe(true);
    expect(isDependencyUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isDependencyUnavailable(new Error('timeout exceeded when trying to connect'))).toBe(true);
    expect(isDependencyUnavailable(new Error('Query read timeout'))).toBe(true);
    for (const code of ['P1001', 'P1002', 'P1008', 'P1017', 'P2024']) expect(isDependencyUnavailable(Object.assign(new Error(code), { code }))).toBe(true);
    expect(isDependencyUnavailable(Object.assign(new Error('P2002'), { code: 'P2002' }))).toBe(false);
    expect(isDependencyUnavailable({ message: 'x', cause: { kind: 'TooManyConnections' } })).toBe(true);
    expect(isDependencyUnavailable({ message: 'x', cause: { kind: 'UniqueConstraintViolation', originalCode: '23505' } })).toBe(false);
  });

  it.each([
    "READONLY You can't write against a read only replica.",
    "OOM command not allowed when used memory > 'maxmemory'.",
    'LOADING Redis is loading the dataset in memory',
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
    'BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.',
    'TRYAGAIN Multiple keys request during rehashing of slot',
    'CLUSTERDOWN The cluster is down',
    'NOREPLICAS Not enough good replicas to write.',
  ])('Redis reply %s: retry later', (message) => {
    expect(isDependencyUnavailable(replyError(message))).toBe(true);
  });

  it('ioredis: too many retries, a closed connection, no offline queue, a command timeout; not other replies', () => {
    expect(isDependencyUnavailable(Object.assign(new Error('Reached the max retries per request limit (which is 1).'), { name: 'MaxRetriesPerRequestError' }))).toBe(true);
    expect(isDependencyUnavailable(new Error('Connection is closed.'))).toBe(true);
    expect(isDependencyUnavailable(new Error("Stream isn't writeable and enableOfflineQueue options is false"))).toBe(true);
    expect(isDependencyUnavailable(new Error('Command timed out'))).toBe(true);
    expect(isDependencyUnavailable(replyError('WRONGTYPE Operation against a key holding the wrong kind of value'))).toBe(false);
    expect(isDependencyUnavailable(replyError('NOSCRIPT No matching script. Please use EVAL.'))).toBe(false);
    expect(isDependencyUnavailable(replyError('ERR unknown command'))).toBe(false);
    // the code of a reply, not a word of some other error's message
    expect(isDependencyUnavailable(new Error('OOM command not allowed'))).toBe(false);
  });

  it('bugs and bad requests are not outages; the cause chain is read at most 6 deep', () => {
    expect(isDependencyUnavailable(new TypeError("Cannot read properties of undefined (reading 'id')"))).toBe(false);
    expect(isDependencyUnavailable(new AppError('run.not_found', 'run x not found'))).toBe(false);
    expect(isDependencyUnavailable(null)).toBe(false);
    expect(isDependencyUnavailable('53100')).toBe(false);
    let deep: Error = pgError('53100');
    for (let i = 0; i < 6; i++) deep = new Error(`wrap ${i}`, { cause: deep });
    expect(isDependencyUnavailable(deep)).toBe(false);
  });

  it('serviceUnavailable is the retryable 503 code', () => {
    const e = serviceUnavailable(pgError('53100'));
    expect(e.code).toBe('service.unavailable');
    expect(e.httpStatus).toBe(503);
    expect(e.retryable).toBe(true);
    expect(e.message).toContain('temporarily unavailable');
  });
});
