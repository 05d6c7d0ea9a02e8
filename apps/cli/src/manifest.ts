/**
 * Agent manifests for `aaas publish`: one file (YAML or JSON) holding an agent, the content of its
 * revision and its A2A binding — the admin API's request bodies together:
 *
 * ```yaml
 * slug: my-agent
 * name: My agent
 * description: What it does
 * protocolProfiles: { a2a: { skillsProjection: [ … ] } }   # CreateRevision.protocolProfiles
 * runtime: { kind: scripted, rules: [ … ] }                 # CreateRevision.runtime
 * binding: { transports: [JSONRPC] }                        # PUT …/bindings/a2a (optional)
 * ```
 *
 * Publishing is idempotent: `sameRevisionContent` and `sameBinding` decide whether what the
 * service serves already is what the manifest says, comparing both sides as the service stores
 * them (parsed by the same zod schemas, so defaults are filled in) in RFC 8785 canonical JSON.
 */
import { readFile } from 'node:fs/promises';
import canonicalize from 'canonicalize';
import { parse as parseYaml } from 'yaml';
import { PutA2ABindingSchema, ProtocolProfilesSchema, RuntimeConfigSchema } from '#libs/contracts';
import { UsageError } from './admin-client.js';

export interface AgentManifest {
  slug: string;
  name?: string;
  description?: string;
  protocolProfiles: unknown;
  runtime: { kind: string } & Record<string, unknown>;
  binding?: Record<string, unknown>;
}

/** Read a manifest: `.yaml` / `.yml` as YAML, anything else as JSON. Throws `UsageError`. */
export async function loadManifest(file: string): Promise<AgentManifest> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  const yaml = /\.ya?ml$/i.test(file);
  let m: unknown;
  try {
    m = yaml ? parseYaml(text) : JSON.parse(text);
  } catch (e) {
    throw new UsageError(`${file} is not valid ${yaml ? 'YAML' : 'JSON'}: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`);
  }
  if (m === null || typeof m !== 'object' || Array.isArray(m)) throw new UsageError(`${file}: a manifest is an object`);
  const o = m as Record<string, unknown>;
  const missing = ['slug', 'protocolProfiles', 'runtime'].filter((k) => o[k] === undefined || o[k] === null);
  if (missing.length > 0) throw new UsageError(`${file}: a manifest needs slug, protocolProfiles and runtime (missing: ${missing.join(', ')})`);
  if (typeof o.slug !== 'string') throw new UsageError(`${file}: slug is a string`);
  const runtime = o.runtime as { kind?: unknown };
  if (typeof runtime !== 'object' || typeof runtime.kind !== 'string') throw new UsageError(`${file}: runtime needs a kind`);
  if (o.binding !== undefined && (o.binding === null || typeof o.binding !== 'object' || Array.isArray(o.binding))) throw new UsageError(`${file}: binding is an object`);
  return o as unknown as AgentManifest;
}

const canon = (v: unknown): string => canonicalize(v) ?? 'undefined';

/** The runtime config as the service stores it: parsed by its schema when the kind is a built-in one, else as given. */
function normalizeRuntime(raw: unknown): unknown {
  const parsed = RuntimeConfigSchema.safeParse(raw);
  return parsed.success ? parsed.data : raw;
}

/**
 * True when a revision holding `stored` (an active revision's `protocolProfiles` and `runtime`)
 * serves what `manifest` declares, so publishing it again would change nothing.
 *
 * Runtimes other than `scripted` and `http` (the `a2a` runtime, custom ones) may fill the card at
 * publish from the upstream agent: skills when the manifest declares none, and the card's name and
 * description when the manifest does not give them. Those filled values are not compared.
 */
export function sameRevisionContent(manifest: Pick<AgentManifest, 'protocolProfiles' | 'runtime'>, stored: { protocolProfiles: unknown; runtime: unknown }): boolean {
  if (canon(normalizeRuntime(manifest.runtime)) !== canon(normalizeRuntime(stored.runtime))) return false;
  const wanted = ProtocolProfilesSchema.safeParse(manifest.protocolProfiles);
  // an invalid manifest never matches: publishing it lets the service say what is wrong
  if (!wanted.success) return false;
  const storedParsed = ProtocolProfilesSchema.safeParse(stored.protocolProfiles);
  if (!storedParsed.success) return false;
  const want = structuredClone(wanted.data);
  const have = structuredClone(storedParsed.data);
  const kind = manifest.runtime.kind;
  if (kind !== 'scripted' && kind !== 'http') {
    if (want.a2a.skillsProjection.length === 0) have.a2a.skillsProjection = [];
    if (want.a2a.identityProjection.name === undefined) delete have.a2a.identityProjection.name;
    if (want.a2a.identityProjection.description === undefined) delete have.a2a.identityProjection.description;
  }
  return canon(want) === canon(have);
}

/** The binding fields PUT …/bindings/a2a sets, defaults filled in (the service's DEFAULT_A2A_BINDING). */
export function bindingBody(manifest: Pick<AgentManifest, 'binding'>): Record<string, unknown> {
  return manifest.binding ?? { transports: ['JSONRPC'] };
}

/** True when the agent's current binding (GET /v1/agents/{agent} `binding`) is what PUTting the manifest's binding would make it. */
export function sameBinding(manifest: Pick<AgentManifest, 'binding'>, current: Record<string, unknown> | null | undefined): boolean {
  if (!current) return false;
  const parsed = PutA2ABindingSchema.safeParse(bindingBody(manifest));
  if (!parsed.success) return false;
  const defined = Object.fromEntries(Object.entries(parsed.data).filter(([, v]) => v !== undefined));
  const want = { transports: ['JSONRPC'], security: { scheme: 'none' }, extensions: [], enabled: true, ...defined };
  const have = { transports: current.transports, security: current.security, extensions: current.extensions, enabled: current.enabled };
  return canon(want) === canon(have);
}
