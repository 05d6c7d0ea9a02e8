import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';
import { APP_CONFIG, type AppConfig } from '#libs/config';

// KEYS: org set, agent set. ARGV: now, expiresAt, member, orgMax, agentMax, ttlMs.
// Each set holds the executions running for that org / agent, scored by when their slot expires
// (a crashed worker's slots free themselves). Grants a slot in both or in neither.
const ACQUIRE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
if tonumber(ARGV[4]) > 0 and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) and not redis.call('ZSCORE', KEYS[1], ARGV[3]) then return 0 end
if tonumber(ARGV[5]) > 0 and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) and not redis.call('ZSCORE', KEYS[2], ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return 1`;

/**
 * Fair execution across every worker: at most EXECUTION_MAX_PER_ORG executions of one
 * organization and EXECUTION_MAX_PER_AGENT of one agent run at once (defaults: half of
 * WORKER_CONCURRENCY each), so one tenant flooding the queue cannot take every worker slot.
 * Slots live in Redis sorted sets, expire on their own (a dead worker's slots free themselves
 * after `ttlMs`) and are renewed by the execution's heartbeat. While Redis cannot answer, slots
 * are granted (fail open): fairness degrades, execution does not stop.
 */
@Injectable()
export class ExecutionSlots implements OnApplicationShutdown {
  private readonly log = new Logger(ExecutionSlots.name);
  private readonly redis: Redis;
  private readonly prefix: string;
  readonly maxPerOrg: number;
  readonly maxPerAgent: number;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.redis = new Redis(config.REDIS_URL, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 1_000, lazyConnect: false });
    this.redis.on('error', () => undefined);
    this.redis.defineCommand('aaasAcquireSlot', { numberOfKeys: 2, lua: ACQUIRE });
    this.prefix = `${config.REDIS_PREFIX}:exec`;
    const half = Math.max(1, Math.ceil(config.WORKER_CONCURRENCY / 2));
    this.maxPerOrg = config.EXECUTION_MAX_PER_ORG ?? half;
    this.maxPerAgent = config.EXECUTION_MAX_PER_AGENT ?? half;
  }

  private keys(orgId: string, agentId: string): [string, string] {
    return [`${this.prefix}:org:${orgId}`, `${this.prefix}:agent:${agentId}`];
  }

  /** Take (or renew) a slot for `executionId` until now + `ttlMs`. False: the org or agent is at its limit. */
  async acquire(orgId: string, agentId: string, executionId: string, ttlMs: number): Promise<boolean> {
    if (this.maxPerOrg === 0 && this.maxPerAgent === 0) return true;
    const now = Date.now();
    try {
      const granted = await (this.redis as unknown as { aaasAcquireSlot(...a: Array<string | number>): Promise<number> }).aaasAcquireSlot(
        ...this.keys(orgId, agentId),
        now,
        now + ttlMs,
        executionId,
        this.maxPerOrg,
        this.maxPerAgent,
        ttlMs * 4,
      );
      return granted === 1;
    } catch (e) {
      this.log.debug?.(`slot check skipped (Redis): ${e instanceof Error ? e.message : String(e)}`);
      return true;
    }
  }

  /** Give the slot back (fire-and-forget; an unreleased slot expires on its own). */
  release(orgId: string, agentId: string, executionId: string): void {
    if (this.maxPerOrg === 0 && this.maxPerAgent === 0) return;
    const [org, agent] = this.keys(orgId, agentId);
    this.redis.pipeline().zrem(org, executionId).zrem(agent, executionId).exec().catch(() => undefined);
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
