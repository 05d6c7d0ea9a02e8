import { createHash, randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import type { ApiKeyScope } from '#libs/contracts';
import { AppError, TtlLruCache } from '#libs/common';
import { generateApiKey, hashSecret, parseApiKey, secretMatches } from './api-key.js';
import { ApiKeyRepository } from './api-key.repository.js';
import { isUuid } from './ids.js';
import type { ApiKeyInfo, CreatedApiKey, Principal } from './registry.types.js';

/** How long a successful authentication is reused without asking the database. */
export const AUTH_CACHE_TTL_MS = 5_000;
/** Most authentications kept in memory (least recently used ones go first). */
export const AUTH_CACHE_MAX_ENTRIES = 10_000;
/**
 * Minimum time, in milliseconds, between two writes of one key's `lastUsedAt`: by one process
 * (in memory) and, through the UPDATE's condition, by all processes sharing the database. So
 * `lastUsedAt` may lag the key's real last use by up to this much.
 */
export const LAST_USED_RECORD_INTERVAL_MS = 60_000;
/** Most keys whose last recorded use a process remembers; past this the least recently used are forgotten (a few extra writes, bounded memory). */
export const LAST_USED_MAX_TRACKED_KEYS = 10_000;

/**
 * API keys: creation (the secret is shown once), authentication, revocation.
 *
 * Authentication is on the A2A hot path, so successful results are cached in memory for
 * AUTH_CACHE_TTL_MS, keyed by a SHA-256 of the presented key (the plaintext is not kept).
 * Consequence: a revocation takes effect at once in the process that revoked the key, and in
 * other processes after at most AUTH_CACHE_TTL_MS. Failed authentications are never cached.
 *
 * Every successful authentication also records the key's use (`lastUsedAt`) off the request path:
 * at most once per LAST_USED_RECORD_INTERVAL_MS per key and process, fire-and-forget.
 */
@Injectable()
export class ApiKeyService {
  private readonly log = new Logger(ApiKeyService.name);
  private readonly cache = new TtlLruCache<string, Principal>(AUTH_CACHE_MAX_ENTRIES, AUTH_CACHE_TTL_MS);
  /** Keys whose use this process asked to record less than LAST_USED_RECORD_INTERVAL_MS ago (monotonic clock). */
  private readonly recentlyRecorded = new TtlLruCache<string, true>(LAST_USED_MAX_TRACKED_KEYS, LAST_USED_RECORD_INTERVAL_MS);

  constructor(private readonly keys: ApiKeyRepository) {}

  /**
   * Create a key for `orgId`. Returns the whole key (`aaas_<prefix>_<secret>`) this once; only
   * the prefix and `sha256(secret)` are stored.
   */
  async create(orgId: string, name: string, scopes: ApiKeyScope[]): Promise<CreatedApiKey> {
    // A prefix collision (62^8 space) is astronomically rare; retry rather than fail.
    for (let attempt = 0; ; attempt++) {
      const material = generateApiKey();
      try {
        const info = await this.keys.insert({ id: randomUUID(), orgId, name, prefix: material.prefix, secretHash: hashSecret(material.secret), scopes: dedupe(scopes) });
        return { id: info.id, orgId, name: info.name, key: material.key, prefix: info.prefix, scopes: info.scopes, createdAt: info.createdAt };
      } catch (e) {
        if (!(e instanceof AppError && e.code === 'api_key.prefix_taken') || attempt >= 3) throw e;
      }
    }
  }

  /**
   * Create a key for the caller's own organization. A caller can only hand out scopes it holds
   * itself, `admin` implying `a2a:invoke` (an `admin` key cannot mint a `platform` key):
   * otherwise `auth.forbidden`.
   */
  async issue(principal: Principal, name: string, scopes: ApiKeyScope[]): Promise<CreatedApiKey> {
    const missing = scopes.filter((s) => !(hasScope(principal, s) || ((s === 'a2a:invoke' || s === 'a2a:all-tasks') && hasScope(principal, 'admin'))));
    if (missing.length > 0) {
      throw new AppError('auth.forbidden', `this API key cannot grant scopes it does not hold: ${missing.join(', ')}`, { details: { scopes: missing } });
    }
    return this.create(principal.orgId, name, scopes);
  }

  /**
   * The principal a presented key (`aaas_<prefix>_<secret>`) authenticates as.
   * Throws `auth.invalid_credentials` when it is malformed, unknown, revoked or the secret does
   * not match (the caller cannot tell which). May answer from the cache (see class doc).
   * On success (cached or not) the key's use is recorded without waiting (see recordUse); a
   * failed authentication records nothing.
   */
  async authenticate(presented: string): Promise<Principal> {
    const cacheKey = createHash('sha256').update(presented, 'utf8').digest('base64');
    const cached = this.cache.get(cacheKey);
    if (cached) {
      this.recordUse(cached.keyId);
      return cached;
    }
    const parsed = parseApiKey(presented);
    const row = parsed ? await this.keys.findByPrefix(parsed.prefix) : null;
    // Compare even for an unknown prefix, so both failures take about as long.
    const ok = secretMatches(parsed?.secret ?? '', row?.secretHash ?? hashSecret('\u0000')) && row !== null && row.revokedAt === null;
    if (!ok || !row) throw new AppError('auth.invalid_credentials', 'invalid API key');
    const principal: Principal = { orgId: row.orgId, keyId: row.id, scopes: row.scopes };
    this.cache.set(cacheKey, principal);
    this.recordUse(principal.keyId);
    return principal;
  }

  /**
   * Start writing the key's `lastUsedAt`, unless this process did so less than
   * LAST_USED_RECORD_INTERVAL_MS ago; returns at once, never throws. A failed write is logged as
   * one warning and not retried before the interval has passed (a database outage costs one
   * warning per key and interval, never a request).
   */
  private recordUse(keyId: string): void {
    if (this.recentlyRecorded.get(keyId)) return;
    this.recentlyRecorded.set(keyId, true);
    this.keys.recordUse(keyId, LAST_USED_RECORD_INTERVAL_MS).catch((e: unknown) => {
      this.log.warn(`recording the use of API key ${keyId} failed: ${e instanceof Error ? e.message : String(e)}`);
    });
  }

  /** The organization's keys, newest first, without secrets. */
  list(orgId: string): Promise<ApiKeyInfo[]> {
    return this.keys.list(orgId);
  }

  /**
   * Revoke a key of `orgId` (revoking twice is a no-op). Evicts it from this process's cache at
   * once; other processes stop accepting it within AUTH_CACHE_TTL_MS.
   * Throws `api_key.not_found` when the organization has no such key.
   */
  async revoke(orgId: string, keyId: string): Promise<ApiKeyInfo> {
    const info = isUuid(keyId) ? await this.keys.revoke(orgId, keyId) : null;
    if (!info) throw new AppError('api_key.not_found', `API key ${keyId} not found`);
    this.cache.deleteWhere((p) => p.keyId === keyId);
    return info;
  }
}

function dedupe<T>(xs: readonly T[]): T[] {
  return [...new Set(xs)];
}

/** True when the principal holds `scope`. */
export function hasScope(principal: Principal, scope: ApiKeyScope): boolean {
  return principal.scopes.includes(scope);
}

/**
 * Whether `principal` may call an A2A binding of `orgId` whose security is `apiKey`: a key of
 * that organization with scope `a2a:invoke` or `admin` (see BindingSecuritySchema).
 */
export function canInvokeA2A(principal: Principal, orgId: string): boolean {
  return principal.orgId === orgId && (hasScope(principal, 'a2a:invoke') || hasScope(principal, 'admin'));
}
