import { Inject, Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { StorageQuotaRepository } from './storage-quota.repository.js';

/** How long (ms) a process trusts its reading of an organization's quota and usage. */
export const STORAGE_USAGE_TTL_MS = 2_000;
/** Organizations whose reading a process keeps at most (the least recently read go first). */
const MAX_CACHED_ORGS = 10_000;

/** An organization's storage: what its runs hold and what it may hold (bytes). */
export interface StorageUsage {
  orgId: string;
  /** Bytes of the messages and artifact parts of the organization's runs (runs.stored_bytes). */
  storedBytes: number;
  /** The quota in force; null = unlimited. */
  quotaBytes: number | null;
  /** `organization`: its own quota (organizations.storage_quota_bytes); `default`: ORG_STORAGE_QUOTA_BYTES. */
  quotaSource: 'organization' | 'default';
}

interface Reading {
  /** 0 = unlimited. */
  limit: number;
  used: number;
  expiresAt: number;
}

/**
 * Per-organization storage quotas (bytes of messages and artifacts, runs.stored_bytes, which the
 * append path keeps in the statement that writes them; an organization's total is the sum of its
 * `org_storage` rows, kept from runs.stored_bytes by triggers). The quota is the organization's own
 * (`organizations.storage_quota_bytes`, set by a platform key), else ORG_STORAGE_QUOTA_BYTES;
 * 0 = unlimited.
 *
 * Two enforcements:
 * - a caller's input (`admit`): each process reads an organization's quota and usage at most once
 *   per STORAGE_USAGE_TTL_MS and counts what it admits meanwhile, so no sum is read per request.
 *   A soft limit across processes: several API instances may take an organization past its quota
 *   by what they admit within one TTL; the next reading refuses from then on.
 * - a runtime's writes (RuntimeOperations, `limit`): the append statement itself refuses a write
 *   that would pass the quota (append-sql.ts, part `quota`), against the total in its snapshot,
 *   and the run fails ("the organization's storage quota is exhausted"). Only the quota's value may
 *   be STORAGE_USAGE_TTL_MS old.
 */
@Injectable()
export class StorageQuotas {
  private readonly readings = new Map<string, Reading>();
  private readonly defaultQuota: number;

  constructor(
    private readonly repo: StorageQuotaRepository,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.defaultQuota = config.ORG_STORAGE_QUOTA_BYTES;
  }

  /**
   * Admit `bytes` of new input (a caller's message: a new task, a follow-up, an answer) for the
   * organization, and count them. Errors: `org.storage_quota_exceeded` when its stored bytes plus
   * `bytes` would pass its quota — when it is used up, and for a message that alone exceeds what
   * remains (details: quotaBytes, storedBytes, messageBytes).
   */
  async admit(orgId: string, bytes: number): Promise<void> {
    const r = await this.reading(orgId);
    if (r.limit === 0) return;
    if (r.used + bytes > r.limit) {
      const left = Math.max(0, r.limit - r.used);
      const message =
        left === 0
          ? `the organization's storage quota is used up (${r.used} of ${r.limit} bytes stored); ask the platform operator to raise it`
          : `the message (${bytes} bytes) exceeds the ${left} bytes left of the organization's storage quota (${r.limit} bytes)`;
      throw new AppError('org.storage_quota_exceeded', message, { details: { quotaBytes: r.limit, storedBytes: r.used, messageBytes: bytes } });
    }
    r.used += bytes;
  }

  /**
   * The quota in force for the organization (bytes; 0 = unlimited), as this process read it at most
   * STORAGE_USAGE_TTL_MS ago: what the append statement checks a runtime's writes against.
   */
  async limit(orgId: string): Promise<number> {
    return (await this.reading(orgId)).limit;
  }

  /** The organization's storage now (read afresh; also refreshes this process's reading). Errors: `org.not_found`. */
  async usage(orgId: string): Promise<StorageUsage> {
    const row = await this.repo.read(orgId, this.defaultQuota, true);
    if (!row) throw new AppError('org.not_found', `organization ${orgId} not found`);
    const limit = row.ownQuotaBytes ?? this.defaultQuota;
    const used = row.storedBytes ?? 0;
    this.remember(orgId, { limit, used, expiresAt: performance.now() + STORAGE_USAGE_TTL_MS });
    return { orgId, storedBytes: used, quotaBytes: limit === 0 ? null : limit, quotaSource: row.ownQuotaBytes === null ? 'default' : 'organization' };
  }

  /** Drop this process's reading of the organization (after its quota changed). */
  forget(orgId: string): void {
    this.readings.delete(orgId);
    this.inFlight.delete(orgId);
  }

  private async reading(orgId: string): Promise<Reading> {
    const now = performance.now();
    const cached = this.readings.get(orgId);
    if (cached && cached.expiresAt > now) return cached;
    // one read per organization at a time: the callers that miss together share it
    const shared = this.inFlight.get(orgId);
    if (shared) return shared;
    const pending: Promise<Reading> = this.repo
      .read(orgId, this.defaultQuota, false)
      .then((row) => {
        // an organization that vanished has nothing to admit against: the write itself will not find it
        const reading: Reading = { limit: row ? (row.ownQuotaBytes ?? this.defaultQuota) : 0, used: row?.storedBytes ?? 0, expiresAt: now + STORAGE_USAGE_TTL_MS };
        // not kept when the quota changed meanwhile (forget dropped this read)
        if (this.inFlight.get(orgId) === pending) this.remember(orgId, reading);
        return reading;
      })
      .finally(() => {
        if (this.inFlight.get(orgId) === pending) this.inFlight.delete(orgId);
      });
    this.inFlight.set(orgId, pending);
    return pending;
  }

  /** Reads in flight, per organization (`reading`). */
  private readonly inFlight = new Map<string, Promise<Reading>>();

  private remember(orgId: string, reading: Reading): void {
    this.readings.delete(orgId);
    if (this.readings.size >= MAX_CACHED_ORGS) this.readings.delete(this.readings.keys().next().value!);
    this.readings.set(orgId, reading);
  }
}
