import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';
import { APP_CONFIG, type AppConfig } from '#libs/config';

/*
 * Take (or renew) a slot, in one round trip.
 * KEYS: 1 org running, 2 agent running, 3 all running, 4 org's waiting line, 5 org's waiting
 *       line last seen, 6 active orgs, 7 live workers.
 * ARGV: 1 now, 2 slot expiresAt, 3 executionId, 4 orgMax (0: no org fairness, -1: the fair share
 *       only, n: at most n), 5 agentMax (0: none), 6 key ttl ms, 7 orgId, 8 waiting member ('' =
 *       none: not ordered), 9 its enqueue time (the line's order), 10 this worker's member
 *       (`<id>|<concurrency>`), 11 when a waiting member that stopped coming back is dropped.
 * Running sets are scored by when the slot expires (a dead worker's slots free themselves).
 * Slots: the sum of the live workers' concurrency. An org's cap: max(1, floor(slots / active
 * orgs)), bounded by orgMax. A reserve of floor(slots / 10) slots (at least 1 when slots >= 2) is
 * kept for orgs with nothing running, so a newcomer starts at once while busy orgs fill the rest.
 * Within an org, executions are admitted in enqueue order: only the oldest of its waiting line
 * may start. Returns 1 (granted) or 0 (wait).
 */
const ACQUIRE = `
local now = tonumber(ARGV[1])
for i = 1, 3 do redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now) end
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', now)
local gone = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now, 'LIMIT', 0, 100)
for _, m in ipairs(gone) do
  redis.call('ZREM', KEYS[4], m)
  redis.call('ZREM', KEYS[5], m)
end
redis.call('ZADD', KEYS[7], ARGV[2], ARGV[10])
local orgMax = tonumber(ARGV[4])
if orgMax ~= 0 then redis.call('ZADD', KEYS[6], ARGV[2], ARGV[7]) end
local function keep()
  for i = 1, 7 do redis.call('PEXPIRE', KEYS[i], ARGV[6]) end
end
if redis.call('ZSCORE', KEYS[1], ARGV[3]) then
  for i = 1, 3 do redis.call('ZADD', KEYS[i], ARGV[2], ARGV[3]) end
  keep()
  return 1
end
local agentMax = tonumber(ARGV[5])
local ok = not (agentMax > 0 and redis.call('ZCARD', KEYS[2]) >= agentMax)
if orgMax ~= 0 then
  local slots = 0
  for _, w in ipairs(redis.call('ZRANGE', KEYS[7], 0, -1)) do slots = slots + (tonumber(string.match(w, '|(%d+)$')) or 0) end
  local cap = math.max(1, math.floor(slots / math.max(1, redis.call('ZCARD', KEYS[6]))))
  if orgMax > 0 and orgMax < cap then cap = orgMax end
  local reserve = 0
  if slots >= 2 then reserve = math.max(1, math.floor(slots / 10)) end
  local running = redis.call('ZCARD', KEYS[1])
  local total = redis.call('ZCARD', KEYS[3])
  ok = ok and running < cap and (total < slots - reserve or (running == 0 and total < slots))
end
if ARGV[8] ~= '' and orgMax ~= 0 then
  redis.call('ZADD', KEYS[4], 'NX', ARGV[9], ARGV[8])
  redis.call('ZADD', KEYS[5], ARGV[11], ARGV[8])
  if not ok or redis.call('ZRANK', KEYS[4], ARGV[8]) > 0 then
    keep()
    return 0
  end
  redis.call('ZREM', KEYS[4], ARGV[8])
  redis.call('ZREM', KEYS[5], ARGV[8])
elseif not ok then
  keep()
  return 0
end
for i = 1, 3 do redis.call('ZADD', KEYS[i], ARGV[2], ARGV[3]) end
keep()
return 1`;

/*
 * Give a slot back. KEYS: org running, agent running, all running, org's waiting line, active
 * orgs. ARGV: executionId, orgId. An org with nothing running or waiting stops counting as active
 * at once (the others' shares grow back).
 */
const RELEASE = `
for i = 1, 3 do redis.call('ZREM', KEYS[i], ARGV[1]) end
if redis.call('ZCARD', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[4]) == 0 then redis.call('ZREM', KEYS[5], ARGV[2]) end
return 1`;

/** Where an execution stands in its organization's line: its job, and when that was enqueued (ms). */
export interface SlotTicket {
  /** Stable across re-deliveries of the same job (the job id). */
  member: string;
  enqueuedAt: number;
}

type SlotCommands = {
  aaasAcquireSlot(...a: Array<string | number>): Promise<number>;
  aaasReleaseSlot(...a: Array<string | number>): Promise<number>;
};

/**
 * Fair execution across every worker and any number of tenants. An organization runs at most
 * its fair share of the slots at once — max(1, floor(slots / active organizations)), slots being
 * the concurrency of the live workers and an organization active while it has executions running
 * or waiting — bounded by EXECUTION_MAX_PER_ORG when set (0: no per-org limit), and an agent at
 * most EXECUTION_MAX_PER_AGENT (default: half of WORKER_CONCURRENCY). A tenth of the slots (at
 * least one) is kept for organizations with nothing running, so a newcomer starts within a
 * deferral even while busy tenants fill the rest; as busy tenants' executions end, their shares
 * shrink to make room. An execution over its limit does not hold a worker slot: it is deferred
 * (back to the queue) and waits in its organization's line, which admits only its oldest
 * execution, so one organization's runs start in enqueue order (a job that stops coming back leaves the
 * line after a while). One Lua script, one round trip, per take or renewal.
 *
 * Slots live in Redis sorted sets, expire on their own (a dead worker's slots free themselves
 * after `ttlMs`) and are renewed by the execution's heartbeat. While Redis cannot answer, slots
 * are granted (fail open): fairness degrades, execution does not stop.
 */
@Injectable()
export class ExecutionSlots implements OnApplicationShutdown {
  private readonly log = new Logger(ExecutionSlots.name);
  private readonly redis: Redis;
  private readonly prefix: string;
  /** 0: no per-org limit; -1: the fair share only; n: the fair share, at most n. */
  readonly maxPerOrg: number;
  readonly maxPerAgent: number;
  /** This process's entry among the live workers (each instance its own, with its concurrency). */
  private readonly worker: string;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.redis = new Redis(config.REDIS_URL, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 1_000, lazyConnect: false });
    this.redis.on('error', () => undefined);
    this.redis.defineCommand('aaasAcquireSlot', { numberOfKeys: 7, lua: ACQUIRE });
    this.redis.defineCommand('aaasReleaseSlot', { numberOfKeys: 5, lua: RELEASE });
    this.prefix = `${config.REDIS_PREFIX}:exec`;
    const half = Math.max(1, Math.ceil(config.WORKER_CONCURRENCY / 2));
    this.maxPerOrg = config.EXECUTION_MAX_PER_ORG ?? -1;
    this.maxPerAgent = config.EXECUTION_MAX_PER_AGENT ?? half;
    this.worker = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}|${config.WORKER_CONCURRENCY}`;
  }

  private keys(orgId: string, agentId: string): string[] {
    const org = `${this.prefix}:org:${orgId}`;
    return [org, `${this.prefix}:agent:${agentId}`, `${this.prefix}:all`, `${org}:line`, `${org}:line-seen`, `${this.prefix}:orgs`, `${this.prefix}:workers`];
  }

  /**
   * Take (or renew) a slot for `executionId` until now + `ttlMs` (ms). False: the org or agent is
   * at its limit, or earlier executions of the org (by `ticket.enqueuedAt`) wait first; the caller
   * defers and comes back with the same ticket. Without a ticket, not ordered within its org.
   */
  async acquire(orgId: string, agentId: string, executionId: string, ttlMs: number, ticket?: SlotTicket): Promise<boolean> {
    if (this.maxPerOrg === 0 && this.maxPerAgent === 0) return true;
    const now = Date.now();
    try {
      const granted = await (this.redis as unknown as SlotCommands).aaasAcquireSlot(
        ...this.keys(orgId, agentId),
        now,
        now + ttlMs,
        executionId,
        this.maxPerOrg,
        this.maxPerAgent,
        ttlMs * 4,
        orgId,
        ticket?.member ?? '',
        ticket?.enqueuedAt ?? now,
        this.worker,
        // a waiting job comes back within a deferral or a pass of the queue; one that does not
        // (removed, its queue lost) stops holding its org's line after this
        now + ttlMs * 2,
      );
      return granted === 1;
    } catch (e) {
      this.log.debug?.(`slot check skipped (Redis): ${e instanceof Error ? e.message : String(e)}`);
      return true;
    }
  }

  /**
   * Take a job out of its organization's line without running it (its execution found nothing to
   * do): the org's later runs need not wait for it to expire. Fire-and-forget.
   */
  leaveLine(orgId: string, member: string): void {
    if (this.maxPerOrg === 0) return;
    const [, , , line, seen] = this.keys(orgId, '-');
    this.redis.pipeline().zrem(line!, member).zrem(seen!, member).exec().catch(() => undefined);
  }

  /** Give the slot back (fire-and-forget; an unreleased slot expires on its own). */
  release(orgId: string, agentId: string, executionId: string): void {
    if (this.maxPerOrg === 0 && this.maxPerAgent === 0) return;
    const [org, agent, all, line, , orgs] = this.keys(orgId, agentId);
    (this.redis as unknown as SlotCommands).aaasReleaseSlot(org!, agent!, all!, line!, orgs!, executionId, orgId).catch(() => undefined);
  }

  onApplicationShutdown(): void {
    this.redis.disconnect();
  }
}

/** An execution that must wait for its tenant's slot: the transport re-delivers it after `delayMs`. */
export class ExecutionDeferred extends Error {
  constructor(readonly delayMs: number) {
    super(`execution deferred for ${delayMs} ms (tenant at its concurrency limit)`);
    this.name = 'ExecutionDeferred';
  }
}
