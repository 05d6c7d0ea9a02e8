import { randomBytes, randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { RunNotifier } from '#libs/runs';
import { AesGcmKeyCipher, type KeyCipher } from '#libs/trust';
import { checkOutboundUrl, outboundPolicy, type OutboundPolicy } from '#libs/outbound';
import { PushConfigRepository, type PushConfigRow, type PushDeliveryRow } from './push-config.repository.js';

/** What a caller asks for (A2A TaskPushNotificationConfig / v0.3 PushNotificationConfig, canonical). */
export interface PushConfigInput {
  /** The caller's id for the config; a UUID when absent. */
  configId?: string;
  url: string;
  /** Echoed in `X-A2A-Notification-Token` on every delivery. */
  token?: string;
  /** Sent as `Authorization: <scheme> <credentials>`. */
  authentication?: { scheme: string; credentials?: string };
}

/** A push config as callers see it (secrets never returned, except `webhookSecret` once). */
export interface PushConfigView {
  configId: string;
  runId: string;
  url: string;
  token?: string;
  /** The scheme only: credentials are never returned. */
  authentication?: { scheme: string };
  protocolVersion: '1.0' | '0.3';
  status: string;
  /** The last sequence delivered. */
  cursor: number;
  lastError: string | null;
  /** Standard Webhooks signing secret (`whsec_…`): only in the response that created the config. */
  webhookSecret?: string;
}

/** A config with its delivery attempts, for operators. */
export interface PushConfigAudit extends PushConfigView {
  attempts: number;
  nextAttemptAt: string;
  createdAt: string;
  deliveries: Array<Omit<PushDeliveryRow, 'attemptedAt'> & { attemptedAt: string }>;
}

/** A config ready to deliver: secrets decrypted. */
export interface PushTarget {
  id: string;
  orgId: string;
  runId: string;
  configId: string;
  protocolVersion: '1.0' | '0.3';
  url: URL;
  token: string | null;
  authorization: string | null;
  webhookSecret: string;
}

/** A config `PushConfigService.admit` let through: its checked URL and its id (the given one, or a new one). */
export interface AdmittedPushConfig {
  url: URL;
  configId: string;
}

/**
 * Push notification configs of tasks (runs), scoped to the org, the run and the principal that
 * created them. URLs are checked against the outbound policy when set (and again when connecting);
 * authentication credentials and the Standard Webhooks secret are stored encrypted
 * (PUSH_ENCRYPTION_SECRET, else SIGNING_KEY_ENCRYPTION_SECRET). A new config wakes the workers'
 * delivery loops. Bounded: PUSH_MAX_CONFIGS_PER_TASK per task, PUSH_MAX_ACTIVE_CONFIGS_PER_ORG in
 * delivery per organization (checked before the insert: concurrent sets may pass it by what they
 * add together), PUSH_CONFIG_MAX_BYTES per config.
 * Errors: `push.not_configured`, `push.url_refused`, `push.too_many_configs`,
 * `push.config_not_found`, `request.invalid` (a config over PUSH_CONFIG_MAX_BYTES).
 */
@Injectable()
export class PushConfigService {
  private readonly cipher: KeyCipher | null;
  readonly policy: OutboundPolicy;
  private readonly maxPerTask: number;
  private readonly maxActivePerOrg: number;
  private readonly maxBytes: number;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly repo: PushConfigRepository,
    private readonly notifier: RunNotifier,
  ) {
    const secret = config.PUSH_ENCRYPTION_SECRET ?? config.SIGNING_KEY_ENCRYPTION_SECRET;
    this.cipher = secret ? new AesGcmKeyCipher(secret) : null;
    this.policy = outboundPolicy(config.PUSH_ALLOWED_CIDRS);
    this.maxPerTask = config.PUSH_MAX_CONFIGS_PER_TASK;
    this.maxActivePerOrg = config.PUSH_MAX_ACTIVE_CONFIGS_PER_ORG;
    this.maxBytes = config.PUSH_CONFIG_MAX_BYTES;
  }

  /**
   * Every check `set` makes before it writes, writing nothing: the outbound policy of the URL,
   * PUSH_CONFIG_MAX_BYTES, and room under PUSH_MAX_CONFIGS_PER_TASK (for `scope.runId`; none for
   * a task not created yet) and PUSH_MAX_ACTIVE_CONFIGS_PER_ORG. A config sent with a message is
   * admitted before the message's command runs, so a refused one leaves no task or message behind
   * (concurrent sets may still pass the counts together, as they may `set`'s). Errors as `set`'s.
   * The result, given to `set` for the same scope (with `runId` when the task existed) and input,
   * spares it the same checks.
   */
  async admit(scope: { orgId: string; runId?: string; createdBy: string | null }, input: PushConfigInput): Promise<AdmittedPushConfig> {
    this.requireCipher();
    const url = await checkOutboundUrl(input.url, this.policy);
    const configId = input.configId || randomUUID();
    const bytes = configBytes(input);
    if (bytes > this.maxBytes) {
      throw new AppError('request.invalid', `the push notification config holds ${bytes} bytes (url, token, authentication); at most ${this.maxBytes} (PUSH_CONFIG_MAX_BYTES)`, {
        details: { bytes, limit: this.maxBytes },
      });
    }
    const count = await this.repo.count(scope.orgId, scope.runId ?? null, this.maxActivePerOrg);
    const full = count.task >= this.maxPerTask || count.active >= this.maxActivePerOrg;
    // an update of the caller's own config adds none
    if (full && !(scope.runId && (await this.repo.list(scope.orgId, scope.runId, scope.createdBy)).some((c) => c.configId === configId))) {
      if (count.task >= this.maxPerTask) throw new AppError('push.too_many_configs', `task ${scope.runId} already has ${this.maxPerTask} push notification configs`, { details: { runId: scope.runId } });
      throw new AppError('push.too_many_configs', `the organization already has ${this.maxActivePerOrg} push notification configs in delivery (PUSH_MAX_ACTIVE_CONFIGS_PER_ORG)`, {
        details: { ...(scope.runId ? { runId: scope.runId } : {}), limit: this.maxActivePerOrg },
      });
    }
    return { url, configId };
  }

  /** True when this deployment can keep push secrets (and so serve push at all). */
  get enabled(): boolean {
    return this.cipher !== null;
  }

  /**
   * Create (or, same configId and principal, update) a config of `runId`. `fromSequence`: the
   * delivery starts after it (0: the task's whole story; a config added to a running task starts
   * at its current sequence). The signing secret is in the result only when the config is new and
   * `reveal` (else the first get / list of its caller shows it). `admitted`: what `admit` returned
   * for this config just before (its checks are not made again).
   */
  async set(
    scope: { orgId: string; runId: string; agentId: string; createdBy: string | null },
    input: PushConfigInput,
    protocolVersion: '1.0' | '0.3',
    fromSequence: number,
    reveal = true,
    admitted?: AdmittedPushConfig,
  ): Promise<PushConfigView> {
    const cipher = this.requireCipher();
    const { url, configId } = admitted ?? (await this.admit(scope, input));
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const saved = await this.repo.upsert({
      id: randomUUID(),
      orgId: scope.orgId,
      runId: scope.runId,
      agentId: scope.agentId,
      configId,
      protocolVersion,
      url: url.toString(),
      token: input.token ?? null,
      authScheme: input.authentication?.scheme ?? null,
      authCredentials: input.authentication?.credentials !== undefined ? cipher.encrypt(input.authentication.credentials) : null,
      webhookSecret: cipher.encrypt(secret),
      createdBy: scope.createdBy,
      cursor: fromSequence,
    });
    if (!saved) throw new AppError('push.config_not_found', `push notification config ${configId} of task ${scope.runId} belongs to another caller`, { details: { configId } });
    this.notifier.notifyPushConfigured(scope.runId);
    // the secret is shown once: here, or (a config set inside SendMessage, whose answer is the
    // task) by the first get / list of its caller
    if (!saved.created || !reveal) return toView(saved.row);
    await this.repo.reveal(scope.orgId, [saved.row.id]);
    return { ...toView(saved.row), webhookSecret: secret };
  }

  async get(scope: { orgId: string; runId: string; createdBy: string | null }, configId: string): Promise<PushConfigView> {
    const found = (await this.list(scope)).find((c) => c.configId === configId);
    if (!found) throw new AppError('push.config_not_found', `task ${scope.runId} has no push notification config ${configId}`, { details: { configId } });
    return found;
  }

  /** The caller's configs of a run; a secret not shown yet is included, once. */
  async list(scope: { orgId: string; runId: string; createdBy: string | null }): Promise<PushConfigView[]> {
    const rows = await this.repo.list(scope.orgId, scope.runId, scope.createdBy);
    const unrevealed = rows.filter((r) => !r.secretRevealed).map((r) => r.id);
    const now = await this.repo.reveal(scope.orgId, unrevealed);
    const cipher = this.cipher;
    return rows.map((r) => (now.has(r.id) && cipher ? { ...toView(r), webhookSecret: cipher.decrypt(r.webhookSecret) } : toView(r)));
  }

  /**
   * Idempotent: deleting a config that is not there succeeds. Deliveries stop: the config's lease
   * is freed at once and the run's "push configured" signal tells workers to drop what they hold
   * of it (a lost signal: the next pass's claim or record finds it deleted).
   */
  async delete(scope: { orgId: string; runId: string; createdBy: string | null }, configId: string): Promise<void> {
    if (await this.repo.delete(scope.orgId, scope.runId, configId, scope.createdBy)) this.notifier.notifyPushConfigured(scope.runId);
  }

  /** Every live config of a run with its newest delivery attempts (admin API). */
  async audit(orgId: string, runId: string, deliveriesPerConfig = 50): Promise<PushConfigAudit[]> {
    const rows = await this.repo.listAll(orgId, runId);
    return Promise.all(
      rows.map(async (row) => ({
        ...toView(row),
        attempts: row.attempts,
        nextAttemptAt: new Date(row.nextAttemptAt).toISOString(),
        createdAt: new Date(row.createdAt).toISOString(),
        deliveries: (await this.repo.deliveries(orgId, runId, row.id, deliveriesPerConfig)).map((d) => ({ ...d, attemptedAt: new Date(d.attemptedAt).toISOString() })),
      })),
    );
  }

  /** A claimed row with its secrets decrypted, for the delivery loop. */
  target(row: PushConfigRow): PushTarget {
    const cipher = this.requireCipher();
    const credentials = row.authCredentials !== null ? cipher.decrypt(row.authCredentials) : null;
    return {
      id: row.id,
      orgId: row.orgId,
      runId: row.runId,
      configId: row.configId,
      protocolVersion: row.protocolVersion,
      url: new URL(row.url),
      token: row.token,
      authorization: row.authScheme ? `${row.authScheme}${credentials ? ` ${credentials}` : ''}` : null,
      webhookSecret: cipher.decrypt(row.webhookSecret),
    };
  }

  private requireCipher(): KeyCipher {
    if (!this.cipher) {
      throw new AppError('push.not_configured', 'push notifications are not configured on this deployment (set PUSH_ENCRYPTION_SECRET)');
    }
    return this.cipher;
  }
}

/** What a config stores of the caller's (UTF-8 bytes): its URL, token, authentication scheme and credentials. */
function configBytes(input: PushConfigInput): number {
  return [input.url, input.token, input.authentication?.scheme, input.authentication?.credentials].reduce((n, v) => n + (v ? Buffer.byteLength(v) : 0), 0);
}

function toView(row: PushConfigRow): PushConfigView {
  return {
    configId: row.configId,
    runId: row.runId,
    url: row.url,
    ...(row.token !== null && { token: row.token }),
    ...(row.authScheme !== null && { authentication: { scheme: row.authScheme } }),
    protocolVersion: row.protocolVersion,
    status: row.status,
    cursor: row.cursor,
    lastError: row.lastError,
  };
}
