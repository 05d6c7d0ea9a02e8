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
 * Take slots for a batch of new executions, in one round trip (the renewals of running ones use
 * ACQUIRE). Items are given in enqueue order.
 * KEYS: 1 all running, 2 active orgs, 3 live workers, then per item i (from 4 + 4(i-1)): org
 *       running, agent running, org's waiting line, org's waiting line last seen.
 * ARGV: 1 now, 2 slot expiresAt, 3 orgMax, 4 agentMax, 5 key ttl ms, 6 this worker's member,
 *       7 when a waiting member that stopped coming back is dropped, 8 grants at most (the
 *       worker's own room: items past it only take their place in their org's line), 9 '1' to do
 *       the global housekeeping (expire dead slots, active orgs and workers, renew this worker's
 *       entry: every HOUSEKEEPING_MS per process, not every call), then per item i (from
 *       10 + 5(i-1)): executionId, orgId, agentId, waiting member ('' = not ordered), enqueue time.
 * The rules are ACQUIRE's, with one difference that keeps a busy organization from convoying: the
 * oldest members of an org's line that are in this batch may start together, up to `room` (how
 * many more the org may run now) and up to the first one that is not here or must wait — not only
 * the single oldest. An org whose line is empty and whose members here may all start now skips
 * the line altogether (joining and leaving it in one call would leave it as it was): the common
 * case of an org below its share costs no line commands. Each key is read and written once per
 * batch (variadic ZADD / ZREM), so the cost is per batch, not per execution. Returns one 1 (granted) or 0 (wait) per item,
 * then the ids of the orgs of this batch whose slots may be handed on locally for now ('*': all):
 * total running within slots - reserve, the org running within its cap, and its line, after
 * this call, empty or headed by one of this batch's members (the caller's oldest).
 */
const ACQUIRE_BATCH = `
local now = tonumber(ARGV[1])
local exp = ARGV[2]
local orgMax = tonumber(ARGV[3])
local agentMax = tonumber(ARGV[4])
local ttl = ARGV[5]
local n = (#KEYS - 3) / 4
local housekeeping = ARGV[9] == '1'
if housekeeping then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  redis.call('ZADD', KEYS[3], exp, ARGV[6])
end
local slots = 0
for _, w in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do slots = slots + (tonumber(string.match(w, '|(%d+)$')) or 0) end
local reserve = 0
if slots >= 2 then reserve = math.max(1, math.floor(slots / 10)) end
local total = redis.call('ZCARD', KEYS[1])
local orgs, agents, orgOrder, agentOrder = {}, {}, {}, {}
for i = 1, n do
  local k = 3 + (i - 1) * 4
  local a = 9 + (i - 1) * 5
  local ok = KEYS[k + 1]
  if not orgs[ok] then
    orgs[ok] = { id = ARGV[a + 2], line = KEYS[k + 3], seen = KEYS[k + 4], add = {}, seenAdd = {}, granted = {}, leave = {}, present = {} }
    table.insert(orgOrder, ok)
  end
  local o = orgs[ok]
  if ARGV[a + 4] ~= '' and orgMax ~= 0 then
    o.present[ARGV[a + 4]] = i
    table.insert(o.add, ARGV[a + 5]); table.insert(o.add, ARGV[a + 4])
    table.insert(o.seenAdd, ARGV[7]); table.insert(o.seenAdd, ARGV[a + 4])
  end
  local ak = KEYS[k + 2]
  if not agents[ak] then
    agents[ak] = { granted = {} }
    table.insert(agentOrder, ak)
  end
end
if orgMax ~= 0 then
  local ids = {}
  for _, ok in ipairs(orgOrder) do table.insert(ids, exp); table.insert(ids, orgs[ok].id) end
  redis.call('ZADD', KEYS[2], unpack(ids))
end
-- an org's line joined by this batch's members (and cleared of the absent), once per org
local function joinLine(o)
  if o.joined then return end
  o.joined = true
  local gone = redis.call('ZRANGEBYSCORE', o.seen, '-inf', now, 'LIMIT', 0, 100)
  if #gone > 0 then
    redis.call('ZREM', o.line, unpack(gone))
    redis.call('ZREM', o.seen, unpack(gone))
  end
  if #o.add > 0 then
    redis.call('ZADD', o.line, 'NX', unpack(o.add))
    redis.call('ZADD', o.seen, unpack(o.seenAdd))
  end
end
for _, ok in ipairs(orgOrder) do
  local o = orgs[ok]
  redis.call('ZREMRANGEBYSCORE', ok, '-inf', now)
  o.running = redis.call('ZCARD', ok)
  -- an empty line: this batch's members may all start without joining it (tried below)
  if orgMax ~= 0 then
    o.quiet = #o.add > 0 and redis.call('ZCARD', o.line) == 0
    if not o.quiet then joinLine(o) end
  end
end
for _, ak in ipairs(agentOrder) do
  redis.call('ZREMRANGEBYSCORE', ak, '-inf', now)
  agents[ak].running = redis.call('ZCARD', ak)
end
local cap = 0
if orgMax ~= 0 then
  cap = math.max(1, math.floor(slots / math.max(1, redis.call('ZCARD', KEYS[2]))))
  if orgMax > 0 and orgMax < cap then cap = orgMax end
end
local out = {}
for i = 1, n do out[i] = 0 end
local all = {}
local budget = tonumber(ARGV[8])
local function grant(i)
  local k = 3 + (i - 1) * 4
  local a = 9 + (i - 1) * 5
  local o = orgs[KEYS[k + 1]]
  local ag = agents[KEYS[k + 2]]
  if budget <= 0 or (agentMax > 0 and ag.running >= agentMax) then return false end
  if orgMax ~= 0 and not (o.running < cap and (total < slots - reserve or (o.running == 0 and total < slots))) then return false end
  budget = budget - 1
  o.running = o.running + 1
  ag.running = ag.running + 1
  total = total + 1
  table.insert(o.granted, exp); table.insert(o.granted, ARGV[a + 1])
  table.insert(ag.granted, exp); table.insert(ag.granted, ARGV[a + 1])
  table.insert(all, exp); table.insert(all, ARGV[a + 1])
  out[i] = 1
  return true
end
-- ordered executions: per org, in line order, the oldest members that are in this batch, up to
-- the org's room and up to the first one that is not here (it waits elsewhere and comes back soon)
-- or must wait: nobody passes an earlier member
-- An org whose line was empty: its members here, in line order (enqueued, then member), all start
-- now or none does this way — then they join the line as usual. Either way the outcome is the
-- line's: an empty line plus these members, granted in order, leaves the line empty again.
local function ungrant(i)
  local k = 3 + (i - 1) * 4
  local o = orgs[KEYS[k + 1]]
  local ag = agents[KEYS[k + 2]]
  budget = budget + 1
  o.running = o.running - 1
  ag.running = ag.running - 1
  total = total - 1
  for _ = 1, 2 do table.remove(o.granted); table.remove(ag.granted); table.remove(all) end
  out[i] = 0
end
local function allStart(o)
  local members = {}
  for m, i in pairs(o.present) do table.insert(members, { m = m, i = i, score = tonumber(ARGV[9 + (i - 1) * 5 + 5]) }) end
  table.sort(members, function(x, y) if x.score ~= y.score then return x.score < y.score end return x.m < y.m end)
  local done = {}
  for _, e in ipairs(members) do
    if o.running >= cap or not grant(e.i) then
      for j = #done, 1, -1 do ungrant(done[j]) end
      return false
    end
    table.insert(done, e.i)
  end
  return true
end
if orgMax ~= 0 then
  for _, ok in ipairs(orgOrder) do
    local o = orgs[ok]
    if o.quiet and not allStart(o) then joinLine(o) end
  end
  for _, ok in ipairs(orgOrder) do
    local o = orgs[ok]
    local room = cap - o.running
    if o.joined and room > 0 then
      for _, m in ipairs(redis.call('ZRANGE', o.line, 0, room - 1)) do
        local i = o.present[m]
        if not i or not grant(i) then break end
        table.insert(o.leave, m)
      end
    end
  end
end
-- executions not ordered within their org
for i = 1, n do
  local a = 9 + (i - 1) * 5
  if ARGV[a + 4] == '' or orgMax == 0 then grant(i) end
end
if #all > 0 then redis.call('ZADD', KEYS[1], unpack(all)) end
for _, ok in ipairs(orgOrder) do
  local o = orgs[ok]
  if #o.granted > 0 then redis.call('ZADD', ok, unpack(o.granted)) end
  if #o.leave > 0 then
    redis.call('ZREM', o.line, unpack(o.leave))
    redis.call('ZREM', o.seen, unpack(o.leave))
  end
  redis.call('PEXPIRE', ok, ttl)
  if o.joined then
    redis.call('PEXPIRE', o.line, ttl)
    redis.call('PEXPIRE', o.seen, ttl)
  end
end
for _, ak in ipairs(agentOrder) do
  if #agents[ak].granted > 0 then redis.call('ZADD', ak, unpack(agents[ak].granted)) end
  redis.call('PEXPIRE', ak, ttl)
end
if housekeeping then
  for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
-- the orgs whose slots may pass from an ended execution to the next of theirs without asking
-- (see ExecutionSlots.acquireBatch): the machine within the reserve, the org within its share,
-- and its line empty or headed by a member of this batch; '*': no org fairness, all of them
if orgMax == 0 then
  table.insert(out, '*')
elseif total <= slots - reserve then
  for _, ok in ipairs(orgOrder) do
    local o = orgs[ok]
    if o.running <= cap then
      local head = nil
      if o.joined then head = redis.call('ZRANGE', o.line, 0, 0)[1] end
      if head == nil or o.present[head] then table.insert(out, o.id) end
    end
  end
end
return out`;

/*
 * Give slots back, for several executions at once. KEYS: all running, active orgs, then per item
 * i (from 3 + 3(i-1)): org running, agent running, org's waiting line. ARGV per item i (from
 * 1 + 2(i-1)): executionId, orgId. An org with nothing running or waiting stops counting as
 * active at once (the others' shares grow back).
 */
const RELEASE_BATCH = `
local n = (#KEYS - 2) / 3
local byKey, order, all = {}, {}, {}
for i = 1, n do
  local k = 2 + (i - 1) * 3
  local e = ARGV[1 + (i - 1) * 2]
  table.insert(all, e)
  for j = 1, 2 do
    local key = KEYS[k + j]
    if not byKey[key] then byKey[key] = {}; table.insert(order, key) end
    table.insert(byKey[key], e)
  end
end
redis.call('ZREM', KEYS[1], unpack(all))
for _, key in ipairs(order) do redis.call('ZREM', key, unpack(byKey[key])) end
local done = {}
for i = 1, n do
  local k = 2 + (i - 1) * 3
  local org = ARGV[2 + (i - 1) * 2]
  if not done[org] then
    done[org] = true
    if redis.call('ZCARD', KEYS[k + 1]) == 0 and redis.call('ZCARD', KEYS[k + 3]) == 0 then redis.call('ZREM', KEYS[2], org) end
  end
end
return 1`;


const NONE: ReadonlySet<string> = new Set();

/** Slots given back within this window (ms) go out in one round trip. */
export const RELEASE_WINDOW_MS = 5;

/**
 * A member of an org's line that no batch has presented for this long (ms) leaves the line, so it
 * stops holding the later ones back (waiting dispatches are presented every PARK_RETRY_MS, a
 * deferred one comes back within a second); when it comes back it takes its old place again.
 */
const LINE_ABSENCE_MS = 2_000;

/**
 * How often (ms) a process presents every dispatch it keeps parked, not only the ones that could
 * start now (well within LINE_ABSENCE_MS: a parked dispatch keeps its place in its line).
 */
export const PARKED_PRESENCE_MS = 500;

/** How often (ms) a process does the global housekeeping of the slots (see ACQUIRE_BATCH). */
const HOUSEKEEPING_MS = 500;

/** Where an execution stands in its organization's line: its job, and when that was enqueued (ms). */
export interface SlotTicket {
  /** Stable across re-deliveries of the same job (the job id). */
  member: string;
  enqueuedAt: number;
}

type SlotCommands = {
  aaasAcquireSlot(...a: Array<string | number>): Promise<number>;
  aaasAcquireSlots(...a: Array<string | number>): Promise<Array<number | string>>;
  aaasReleaseSlots(...a: Array<string | number>): Promise<number>;
};

/**
 * What `acquireBatch` answered: one boolean per request (granted or wait), and the organizations
 * whose slots this process may hand on from an ended execution to its next parked one of the same
 * organization and agent without asking Redis, as of this answer (`'all'`: every one, no org
 * fairness configured). Such a hand-on changes no count Redis keeps (the slot's member stays, it
 * only changes holders), so it is fair while the answer is recent: the org was within its share,
 * the machine within its reserve, and nobody elsewhere was ahead in the org's line.
 */
export interface SlotGrants {
  granted: boolean[];
  handOn: ReadonlySet<string> | 'all';
}

/** A new execution asking for a slot (`acquireBatch`). */
export interface SlotRequest {
  orgId: string;
  agentId: string;
  executionId: string;
  /** Its place in its organization's line (absent: not ordered). */
  ticket?: SlotTicket;
}

/**
 * Fair execution across every worker and any number of tenants. An organization runs at most
 * its fair share of the slots at once — max(1, floor(slots / active organizations)), slots being
 * the concurrency of the live workers and an organization active while it has executions running
 * or waiting — bounded by EXECUTION_MAX_PER_ORG when set (0: no per-org limit), and an agent at
 * most EXECUTION_MAX_PER_AGENT (default: half of WORKER_CONCURRENCY). A tenth of the slots (at
 * least one) is kept for organizations with nothing running, so a newcomer starts within a
 * deferral even while busy tenants fill the rest; as busy tenants' executions end, their shares
 * shrink to make room. An execution over its limit does not hold a worker slot: it waits (parked
 * in its worker, RunExecutor) in its organization's line, which admits its oldest executions
 * only (those of one batch together, never one that passes an earlier one), so one organization's
 * runs start in enqueue order (a dispatch that stops coming back leaves the line after a while). One Lua script, one round trip, per batch of new executions or per renewal.
 * A slot may also pass from an ended execution to the next one of its organization and agent in
 * the same process without a round trip, while the last answer allows it (SlotGrants; RunExecutor).
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
    this.redis.defineCommand('aaasAcquireSlots', { lua: ACQUIRE_BATCH });
    this.redis.defineCommand('aaasReleaseSlots', { lua: RELEASE_BATCH });
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
   * Take slots for new executions in one round trip, until now + `ttlMs` (ms); `requests` in
   * enqueue order, at most `maxGrants` granted (the caller's own room; the others still take their
   * place in their org's line). One boolean per request: false means the caller's room is used up,
   * its org or agent is at its limit, or earlier executions of its org wait first (the oldest of
   * an org's line that fit start together); the caller defers it and comes back with the same
   * ticket. `handOn`: see SlotGrants (empty when Redis did not answer). Fails open (the first
   * `maxGrants` granted) when Redis cannot answer.
   */
  async acquireBatch(requests: readonly SlotRequest[], ttlMs: number, maxGrants = requests.length): Promise<SlotGrants> {
    if (requests.length === 0) return { granted: [], handOn: NONE };
    if (this.maxPerOrg === 0 && this.maxPerAgent === 0) return { granted: requests.map((_, i) => i < maxGrants), handOn: 'all' };
    const now = Date.now();
    const keys: string[] = [`${this.prefix}:all`, `${this.prefix}:orgs`, `${this.prefix}:workers`];
    const housekeeping = now - this.lastHousekeeping >= HOUSEKEEPING_MS;
    if (housekeeping) this.lastHousekeeping = now;
    const args: Array<string | number> = [now, now + ttlMs, this.maxPerOrg, this.maxPerAgent, ttlMs * 4, this.worker, now + LINE_ABSENCE_MS, maxGrants, housekeeping ? '1' : '0'];
    for (const r of requests) {
      const [org, agent, , line, seen] = this.keys(r.orgId, r.agentId);
      keys.push(org!, agent!, line!, seen!);
      args.push(r.executionId, r.orgId, r.agentId, r.ticket?.member ?? '', r.ticket?.enqueuedAt ?? now);
    }
    try {
      const out = await (this.redis as unknown as SlotCommands).aaasAcquireSlots(keys.length, ...keys, ...args);
      const orgs = out.slice(requests.length).map(String);
      return { granted: requests.map((_, i) => out[i] === 1), handOn: orgs[0] === '*' ? 'all' : new Set(orgs) };
    } catch (e) {
      this.log.debug?.(`slot check skipped (Redis): ${e instanceof Error ? e.message : String(e)}`);
      return { granted: requests.map((_, i) => i < maxGrants), handOn: NONE };
    }
  }

  /**
   * Take a job out of its organization's line without running it (its execution found nothing to
   * do): the org's later runs need not wait for it to expire. Fire-and-forget.
   */
  leaveLine(orgId: string, member: string): void {
    this.leaveLines([{ orgId, member }]);
  }

  /**
   * `leaveLine` for many (one round trip): e.g. parked dispatches a worker hands back to the queue,
   * which must not hold their orgs' lines while they wait there (a worker whose intake is paused
   * would never present them). When one comes back it takes its old place again (its ticket's
   * enqueue time). Fire-and-forget.
   */
  leaveLines(entries: ReadonlyArray<{ orgId: string; member: string }>): void {
    if (this.maxPerOrg === 0 || entries.length === 0) return;
    const byOrg = new Map<string, string[]>();
    for (const e of entries) {
      const members = byOrg.get(e.orgId);
      if (members) members.push(e.member);
      else byOrg.set(e.orgId, [e.member]);
    }
    const pipe = this.redis.pipeline();
    for (const [orgId, members] of byOrg) {
      const [, , , line, seen] = this.keys(orgId, '-');
      pipe.zrem(line!, ...members).zrem(seen!, ...members);
    }
    pipe.exec().catch(() => undefined);
  }

  /**
   * Give the slot back (fire-and-forget; an unreleased slot expires on its own). The slots given
   * back within RELEASE_WINDOW_MS go out together (one round trip).
   */
  release(orgId: string, agentId: string, executionId: string): void {
    if (this.maxPerOrg === 0 && this.maxPerAgent === 0) return;
    this.releasing.push({ orgId, agentId, executionId });
    if (this.releasing.length > 1) return;
    setTimeout(() => void this.releaseNow(this.releasing.splice(0)), RELEASE_WINDOW_MS);
  }

  /**
   * Give slots back now, in one round trip per 500; resolves once Redis has them back (so a
   * request sent after it sees them free), or when the call fails (at once while Redis is
   * unreachable, at most the 1 s command timeout while it is slow; the slots then expire).
   */
  async releaseNow(all: ReadonlyArray<{ orgId: string; agentId: string; executionId: string }>): Promise<void> {
    if ((this.maxPerOrg === 0 && this.maxPerAgent === 0) || all.length === 0) return;
    const calls: Array<Promise<unknown>> = [];
    for (let i = 0; i < all.length; i += 500) {
      const keys: string[] = [`${this.prefix}:all`, `${this.prefix}:orgs`];
      const args: string[] = [];
      for (const r of all.slice(i, i + 500)) {
        const [org, agent, , line] = this.keys(r.orgId, r.agentId);
        keys.push(org!, agent!, line!);
        args.push(r.executionId, r.orgId);
      }
      calls.push((this.redis as unknown as SlotCommands).aaasReleaseSlots(keys.length, ...keys, ...args).catch(() => undefined));
    }
    await Promise.all(calls);
  }
  private releasing: Array<{ orgId: string; agentId: string; executionId: string }> = [];
  private lastHousekeeping = 0;

  onApplicationShutdown(): void {
    this.redis.disconnect();
  }
}
