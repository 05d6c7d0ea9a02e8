import { Inject, Injectable } from '@nestjs/common';
import { AppError, TtlLruCache } from '#libs/common';
import { APP_CONFIG, runtimeSecretEnv, type AppConfig, type SecretEnvNamespace } from '#libs/config';
import { RuntimeSecretNameSchema } from '#libs/contracts';
import {
  describeSecretRef,
  isLegacySecretEnvName,
  isSecretEnvOwner,
  orgSecretEnvNamespaces,
  secretEnvOwner,
  type RuntimeSecretRef,
  type RuntimeSecrets,
  type RuntimeSecretUse,
} from '#libs/runtimes';
import { AesGcmKeyCipher, type KeyCipher } from '#libs/trust';
import { RuntimeSecretRepository, type RuntimeSecretRow } from './runtime-secret.repository.js';

/** A runtime secret as callers see it: never its value. */
export interface RuntimeSecretInfo {
  name: string;
  /** 1 at creation, + 1 per rotation. */
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

/** Decrypted values kept per process (entries). */
const CACHE_MAX_ENTRIES = 1000;

const info = (r: RuntimeSecretRow): RuntimeSecretInfo => ({ name: r.name, version: r.version, createdAt: r.createdAt, updatedAt: r.updatedAt });

/**
 * Runtime secrets per organization (the `http` runtime's signing key, the `a2a` runtime's upstream
 * credentials), and the RuntimeSecrets port the runtimes resolve them through.
 *
 * - Stored encrypted by a KeyCipher (AES-256-GCM under RUNTIME_SECRET_ENCRYPTION_SECRET, else
 *   SIGNING_KEY_ENCRYPTION_SECRET, domain-separated from the signing keys' use of it); the
 *   plaintext binds the value to (org, name), so a row moved to another organization or name does
 *   not decrypt. Values are never returned by the admin API.
 * - `resolve(orgId, ref)` reads the run's organization only: a `secret` of that org, or a worker
 *   variable inside that org's namespace — `AAAS_RUNTIME_SECRET_<its id>_<NAME>`, a token the
 *   operator mapped to it (RUNTIME_SECRET_ENV_NAMESPACES), or `AAAS_RUNTIME_SECRET_<SLUG>_<NAME>`
 *   with one `_` (secretEnvOwner: decided by the name and the mapping, never by which other
 *   organizations exist); nothing else of the environment is ever read. Values are cached
 *   RUNTIME_SECRET_CACHE_TTL_MS (bounded; refusals are not cached; a rotation or delete in this
 *   process clears its entry at once, in other processes within the TTL).
 *
 * - Bounded: at most RUNTIME_SECRETS_MAX_PER_ORG secrets per organization, each value at most
 *   4096 bytes (the contract's RuntimeSecretValueSchema).
 *
 * Errors: `runtime_secret.not_configured` (no encryption secret, or a value that does not
 * decrypt), `runtime_secret.conflict` (the name exists, or the organization is at its count),
 * `runtime_secret.not_found` (admin routes),
 * `runtime.secret_not_allowed`, `runtime.secret_not_found` (references).
 */
@Injectable()
export class RuntimeSecretService implements RuntimeSecrets {
  private readonly cipher: KeyCipher | null;
  private readonly cache: TtlLruCache<string, { orgId: string; secret?: string; value: string }>;
  private readonly ttlMs: number;
  private readonly envNamespaces: readonly SecretEnvNamespace[];
  private readonly maxPerOrg: number;

  constructor(
    private readonly repo: RuntimeSecretRepository,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    const secret = config.RUNTIME_SECRET_ENCRYPTION_SECRET ?? config.SIGNING_KEY_ENCRYPTION_SECRET;
    this.cipher = secret ? new AesGcmKeyCipher(`aaas.runtime-secrets/v1\n${secret}`) : null;
    this.ttlMs = config.RUNTIME_SECRET_CACHE_TTL_MS;
    this.envNamespaces = config.RUNTIME_SECRET_ENV_NAMESPACES;
    this.maxPerOrg = config.RUNTIME_SECRETS_MAX_PER_ORG;
    this.cache = new TtlLruCache(CACHE_MAX_ENTRIES, this.ttlMs);
  }

  /**
   * Create a secret of the org (version 1). Throws `runtime_secret.conflict` when the name exists,
   * or when the org has RUNTIME_SECRETS_MAX_PER_ORG secrets already (details `limit`).
   */
  async create(orgId: string, name: string, value: string): Promise<RuntimeSecretInfo> {
    const row = await this.repo.insert(orgId, name, this.requireCipher().encrypt(seal(orgId, name, value)), this.maxPerOrg);
    if ('refused' in row) {
      if (row.refused === 'exists') throw new AppError('runtime_secret.conflict', `a runtime secret named ${name} exists; rotate it (PUT /v1/runtime-secrets/${name})`, { details: { name } });
      throw new AppError(
        'runtime_secret.conflict',
        `the organization has ${row.count} runtime secrets, the most this deployment allows (RUNTIME_SECRETS_MAX_PER_ORG ${this.maxPerOrg}); delete one first`,
        { details: { name, limit: this.maxPerOrg } },
      );
    }
    this.forget(orgId, name);
    return info(row);
  }

  /** Replace the value (version + 1); runs see it within RUNTIME_SECRET_CACHE_TTL_MS. Throws `runtime_secret.not_found`. */
  async rotate(orgId: string, name: string, value: string): Promise<RuntimeSecretInfo> {
    const cipher = this.requireCipher();
    const row = isName(name) ? await this.repo.rotate(orgId, name, cipher.encrypt(seal(orgId, name, value))) : null;
    if (!row) throw notFound(name);
    this.forget(orgId, name);
    return info(row);
  }

  /** The org's secrets by name (names, versions, times; never values). */
  async list(orgId: string): Promise<RuntimeSecretInfo[]> {
    return (await this.repo.list(orgId)).map(info);
  }

  /** Delete a secret: revisions referencing it fail their runs (and cannot be published) until it exists again. Throws `runtime_secret.not_found`. */
  async delete(orgId: string, name: string): Promise<void> {
    if (!(isName(name) && (await this.repo.delete(orgId, name)))) throw notFound(name);
    this.forget(orgId, name);
  }

  /**
   * Check a revision's secret references for its organization: every `secretEnv` must lie in the
   * org's namespace (draft and publish); with `publish`, every `secret` must exist. Throws
   * `runtime.secret_not_allowed` / `runtime.secret_not_found` with `details.path` (`runtime.…`).
   */
  async check(orgId: string, uses: RuntimeSecretUse[], opts: { publish: boolean }): Promise<void> {
    for (const { path, ref } of uses) {
      const at = ['runtime', ...path].join('.');
      if ('secretEnv' in ref) await this.requireInNamespace(orgId, ref.secretEnv, at);
      else if (opts.publish && !(await this.repo.ciphertext(orgId, ref.secret))) throw secretMissing(ref.secret, at);
    }
  }

  /** RuntimeSecrets: the value for a run of `orgId` (see the class docstring for what is read). */
  async resolve(orgId: string, ref: RuntimeSecretRef): Promise<string> {
    const key = `${orgId}\n${'secret' in ref ? `s:${ref.secret}` : `e:${ref.secretEnv}`}`;
    const hit = this.ttlMs > 0 ? this.cache.get(key) : undefined;
    if (hit !== undefined) return hit.value;
    const value = 'secret' in ref ? await this.decrypt(orgId, ref.secret) : await this.fromEnv(orgId, ref.secretEnv);
    if (this.ttlMs > 0) this.cache.set(key, { orgId, ...('secret' in ref && { secret: ref.secret }), value });
    return value;
  }

  private async decrypt(orgId: string, name: string): Promise<string> {
    const row = await this.repo.ciphertext(orgId, name);
    if (!row) throw secretMissing(name);
    const cipher = this.requireCipher();
    try {
      return unseal(cipher.decrypt(row.ciphertext), orgId, name);
    } catch (e) {
      throw new AppError('runtime_secret.not_configured', `the runtime secret ${name} does not decrypt with this deployment's RUNTIME_SECRET_ENCRYPTION_SECRET`, { details: { name }, cause: e });
    }
  }

  /** A worker variable of the org's namespace; nothing outside it is read. */
  private async fromEnv(orgId: string, variable: string): Promise<string> {
    await this.requireInNamespace(orgId, variable, 'runtime.secretEnv');
    const value = runtimeSecretEnv(variable);
    if (!value) throw new AppError('runtime.secret_not_found', `the worker variable ${variable} is not set on this worker`, { details: { secretEnv: variable } });
    return value;
  }

  /**
   * `variable` must be `orgId`'s (secretEnvOwner); else `runtime.secret_not_allowed` at `at`, naming
   * the organization's forms (`details.namespaces`, the first as `allowed`) and, for a name an
   * earlier release derived from its slug, why it is refused now and what to rename it to.
   */
  private async requireInNamespace(orgId: string, variable: string, at: string): Promise<void> {
    const org = await this.repo.organization(orgId);
    const owner = secretEnvOwner(variable, this.envNamespaces);
    if (org && isSecretEnvOwner(owner, org)) return;
    const namespaces = org ? orgSecretEnvNamespaces(org, this.envNamespaces) : ['AAAS_RUNTIME_SECRET_<ORG ID>_<NAME>'];
    const allowed = namespaces[0]!;
    const what = describeSecretRef({ secretEnv: variable });
    // nobody's, but an earlier release's reading of this org's slug: say why, and the new name
    if (org && owner === null && isLegacySecretEnvName(variable, org)) {
      const name = variable.slice(`AAAS_RUNTIME_SECRET_${org.slug.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_`.length);
      const rename = allowed.replace('<NAME>', name);
      throw new AppError(
        'runtime.secret_not_allowed',
        `${what} is ambiguous: a name derived from the organization slug with more than one _ after AAAS_RUNTIME_SECRET_ could be another organization's (${org.slug} vs a slug that extends or shortens it), so it is no longer accepted. The operator renames it to ${rename} (this organization's namespace: ${namespaces.join(', ')}), or maps this organization in RUNTIME_SECRET_ENV_NAMESPACES`,
        { details: { path: at, secretEnv: variable, allowed, namespaces, rename } },
      );
    }
    throw new AppError(
      'runtime.secret_not_allowed',
      `${what} is outside this organization's namespace: name a worker variable ${[allowed, ...namespaces.slice(1)].join(' or ')} (declared by the operator), or store the secret with POST /v1/runtime-secrets and reference it as "secret"`,
      { details: { path: at, secretEnv: variable, allowed, namespaces } },
    );
  }

  private requireCipher(): KeyCipher {
    if (!this.cipher) {
      throw new AppError('runtime_secret.not_configured', 'runtime secrets are not configured on this deployment (set RUNTIME_SECRET_ENCRYPTION_SECRET or SIGNING_KEY_ENCRYPTION_SECRET)');
    }
    return this.cipher;
  }

  /** This process sees a rotation or delete at once (others within the TTL). */
  private forget(orgId: string, name: string): void {
    this.cache.deleteWhere((e) => e.orgId === orgId && e.secret === name);
  }
}

function isName(name: string): boolean {
  return RuntimeSecretNameSchema.safeParse(name).success;
}

/** The plaintext stored: the value bound to its org and name. */
function seal(orgId: string, name: string, value: string): string {
  return JSON.stringify({ org: orgId, name, value });
}

function unseal(plaintext: string, orgId: string, name: string): string {
  const v = JSON.parse(plaintext) as { org?: unknown; name?: unknown; value?: unknown };
  if (v.org !== orgId || v.name !== name || typeof v.value !== 'string' || v.value === '') throw new Error('the value is bound to another organization or name');
  return v.value;
}

function notFound(name: string): AppError {
  return new AppError('runtime_secret.not_found', `no runtime secret named ${name}`, { details: { name } });
}

function secretMissing(name: string, at?: string): AppError {
  return new AppError('runtime.secret_not_found', `the runtime secret ${name} does not exist in this organization (create it: POST /v1/runtime-secrets, or \`aaas secrets create ${name}\`)`, {
    details: { ...(at && { path: at }), secret: name },
  });
}
