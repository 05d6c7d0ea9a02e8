import { AppError } from '#libs/common';
import { RUNTIME_SECRET_ENV_PREFIX, type SecretEnvNamespace } from '#libs/config';

/**
 * Where a runtime config takes a secret from — never the secret itself:
 * - `{ secret }`: a runtime secret of the run's organization (`runtime_secrets`, stored encrypted,
 *   managed with `/v1/runtime-secrets`);
 * - `{ secretEnv }`: a worker environment variable declared by the operator, accepted only inside
 *   the organization's namespace (`secretEnvOwner`): `AAAS_RUNTIME_SECRET_<ORG ID>_<NAME>`.
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

/** An organization as the namespace rules see it. */
export interface SecretEnvOrg {
  id: string;
  slug: string;
}

/**
 * Whose a worker variable is, read from its name and the operator's RUNTIME_SECRET_ENV_NAMESPACES
 * only — never from which organizations exist, so creating an organization moves no variable:
 * - `mapping`: `AAAS_RUNTIME_SECRET_<TOKEN>_<NAME>` for a mapped TOKEN: the organization mapped to it
 *   (its id or slug, as the operator wrote it);
 * - `id`: `AAAS_RUNTIME_SECRET_<32 hex digits>_<NAME>`: the organization with that id (the UUID
 *   without its dashes, upper-cased);
 * - `slug`: `AAAS_RUNTIME_SECRET_<SLUG>_<NAME>` with exactly one `_` after the prefix: the
 *   organization whose slug (letters and digits only) is SLUG lower-cased. The names of earlier
 *   releases that read one way only; a name with more `_` could be another organization's
 *   (`ACME_EU_HOOK`: `acme`'s `EU_HOOK` or `acme-eu`'s `HOOK`) and is nobody's.
 * Null for anything else (no NAME, another form). The config's checks make the forms disjoint:
 * no name has two owners.
 */
export type SecretEnvOwner = { by: 'mapping'; org: string } | { by: 'id'; orgId: string } | { by: 'slug'; slug: string };

export function secretEnvOwner(variable: string, mapping: readonly SecretEnvNamespace[]): SecretEnvOwner | null {
  if (!variable.startsWith(RUNTIME_SECRET_ENV_PREFIX)) return null;
  const rest = variable.slice(RUNTIME_SECRET_ENV_PREFIX.length);
  const mapped = mapping.find((m) => rest.length > m.token.length + 1 && rest.startsWith(`${m.token}_`));
  if (mapped) return { by: 'mapping', org: mapped.org };
  const id = /^([0-9A-F]{32})_./.exec(rest)?.[1];
  if (id) return { by: 'id', orgId: uuidOf(id) };
  const slug = /^([A-Z0-9]+)_[A-Z0-9]+$/.exec(rest)?.[1];
  return slug ? { by: 'slug', slug: slug.toLowerCase() } : null;
}

/** True when `owner` is `org`. */
export function isSecretEnvOwner(owner: SecretEnvOwner | null, org: SecretEnvOrg): boolean {
  if (!owner) return false;
  if (owner.by === 'id') return owner.orgId === org.id.toLowerCase();
  if (owner.by === 'slug') return owner.slug === org.slug;
  return owner.org === org.id.toLowerCase() || owner.org === org.slug;
}

/**
 * The forms of the variables `org` may name, for messages: its id's namespace first (always),
 * then what the operator mapped to it, then its slug's one-`_` form when its slug is letters and
 * digits only (and not 32 hex digits, which read as an id).
 */
export function orgSecretEnvNamespaces(org: SecretEnvOrg, mapping: readonly SecretEnvNamespace[]): string[] {
  const forms = [`${RUNTIME_SECRET_ENV_PREFIX}${org.id.replace(/-/g, '').toUpperCase()}_<NAME>`];
  for (const m of mapping) if (m.org === org.id.toLowerCase() || m.org === org.slug) forms.push(`${RUNTIME_SECRET_ENV_PREFIX}${m.token}_<NAME>`);
  const token = org.slug.toUpperCase();
  if (/^[A-Z0-9]+$/.test(token) && !/^[0-9A-F]{32}$/.test(token) && !forms.includes(`${RUNTIME_SECRET_ENV_PREFIX}${token}_<NAME>`)) forms.push(`${RUNTIME_SECRET_ENV_PREFIX}${token}_<NAME without _>`);
  return forms;
}

/**
 * True when an earlier release gave `variable` to `org` (its slug upper-cased, every character
 * outside A-Z0-9 as `_`, then `_`: the longest existing slug won) but these rules do not: a name
 * to rename (see orgSecretEnvNamespaces), explained as such when refused.
 */
export function isLegacySecretEnvName(variable: string, org: SecretEnvOrg): boolean {
  const prefix = `${RUNTIME_SECRET_ENV_PREFIX}${org.slug.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_`;
  return variable.length > prefix.length && variable.startsWith(prefix);
}

/** `0190f3c2-…` from its 32 hex digits. */
function uuidOf(hex: string): string {
  const h = hex.toLowerCase();
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
