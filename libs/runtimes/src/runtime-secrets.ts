import { AppError } from '#libs/common';
import { RUNTIME_SECRET_ENV_PREFIX } from '#libs/config';

/**
 * Where a runtime config takes a secret from — never the secret itself:
 * - `{ secret }`: a runtime secret of the run's organization (`runtime_secrets`, stored encrypted,
 *   managed with `/v1/runtime-secrets`);
 * - `{ secretEnv }`: a worker environment variable declared by the operator, accepted only inside
 *   the organization's namespace `AAAS_RUNTIME_SECRET_<ORG>_<NAME>` (orgSecretEnvPrefix).
 */
export type RuntimeSecretRef = { secret: string } | { secretEnv: string };

/** A secret reference in a runtime config and where it sits (`['credentials', 'secret']`), for error paths. */
export interface RuntimeSecretUse {
  path: string[];
  ref: RuntimeSecretRef;
}

/**
 * Port: the secret values runtimes need, resolved for ONE organization. Declared here (runtimes do
 * not use the database), implemented by libs/registry (`RuntimeSecretService`) and provided under
 * `RUNTIME_SECRETS` (RuntimesModule hands it to the built-in runtimes). A runtime asks with its
 * run's `orgId` only, so a revision reaches its own organization's secrets and nothing else.
 */
export interface RuntimeSecrets {
  /**
   * The secret's value (a non-empty string). May be cached for a few seconds; a rotation is seen
   * within RUNTIME_SECRET_CACHE_TTL_MS.
   *
   * Errors (AppError, see `isSecretRefusal`): `runtime.secret_not_allowed` (a `secretEnv` outside
   * the org's namespace — nothing is read), `runtime.secret_not_found` (no such runtime secret in
   * the org, or the namespaced variable is not set on this worker), `runtime_secret.not_configured`
   * (no encryption secret, or the value does not decrypt). Database errors pass through.
   */
  resolve(orgId: string, ref: RuntimeSecretRef): Promise<string>;
}

/** Nest injection token of the RuntimeSecrets port. */
export const RUNTIME_SECRETS = Symbol('RUNTIME_SECRETS');

/** The port when the process wires no store: every reference is refused (nothing is read from the environment). */
export const NO_RUNTIME_SECRETS: RuntimeSecrets = {
  resolve: () => Promise.reject(new AppError('runtime_secret.not_configured', 'runtime secrets are not available in this process')),
};

const REFUSALS = new Set(['runtime.secret_not_allowed', 'runtime.secret_not_found', 'runtime_secret.not_configured']);

/** True for the errors `RuntimeSecrets.resolve` refuses a reference with: the run fails with its message. */
export function isSecretRefusal(e: unknown): e is AppError {
  return e instanceof AppError && REFUSALS.has(e.code);
}

/** The reference a config's `{ secret?, secretEnv? }` makes (the schema guarantees exactly one). */
export function secretRefOf(c: { secret?: string; secretEnv?: string }): RuntimeSecretRef {
  return c.secret !== undefined ? { secret: c.secret } : { secretEnv: c.secretEnv! };
}

/** `runtime secret "x"` / `worker variable X`, for messages. */
export function describeSecretRef(ref: RuntimeSecretRef): string {
  return 'secret' in ref ? `runtime secret "${ref.secret}"` : `worker variable ${ref.secretEnv}`;
}

/**
 * `AAAS_RUNTIME_SECRET_<ORG>_`: the prefix of an organization's namespace of worker variables
 * (<ORG>: the slug upper-cased, every character outside A-Z0-9 as `_`). When a longer slug's
 * prefix also matches a name (org `a` vs `a-b`), the longer slug owns it.
 */
export function orgSecretEnvPrefix(orgSlug: string): string {
  return `${RUNTIME_SECRET_ENV_PREFIX}${orgSlug.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_`;
}
