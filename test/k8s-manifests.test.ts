import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import ipaddr from 'ipaddr.js';
import { parseAllDocuments } from 'yaml';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';

import { ConfigSchema } from '#libs/config';
import { HealthController } from '../apps/api/src/health/health.controller.js';

/**
 * The compiled schema validators bundled in kubernetes-models (`_schemas/`, not in its exports map:
 * loaded by file). Version 4.x: it supports every Node version we claim (5.x wants Node 22).
 */
async function schemaOf(name: string): Promise<{ validate: (data: unknown) => boolean }> {
  const root = path.dirname(createRequire(import.meta.url).resolve('kubernetes-models'));
  return import(pathToFileURL(path.join(root, '_schemas', `${name}.mjs`)).href);
}
const { validate: deploymentSchema } = await schemaOf('IoK8sApiAppsV1Deployment');
const { validate: jobSchema } = await schemaOf('IoK8sApiBatchV1Job');
const { validate: ingressSchema } = await schemaOf('IoK8sApiNetworkingV1Ingress');
const { validate: pdbSchema } = await schemaOf('IoK8sApiPolicyV1PodDisruptionBudget');
const { validate: configMapSchema } = await schemaOf('IoK8sApiCoreV1ConfigMap');
const { validate: namespaceSchema } = await schemaOf('IoK8sApiCoreV1Namespace');
const { validate: secretSchema } = await schemaOf('IoK8sApiCoreV1Secret');
const { validate: serviceSchema } = await schemaOf('IoK8sApiCoreV1Service');
const { validate: serviceAccountSchema } = await schemaOf('IoK8sApiCoreV1ServiceAccount');

/**
 * The Kubernetes manifests (deploy/k8s), checked offline: every object against the Kubernetes
 * OpenAPI schema bundled in `kubernetes-models` (types, required fields, enums, formats) plus
 * unknown fields (a typo such as `periodSecond` passes a schema without `additionalProperties:
 * false`, and kubectl's strict validation would refuse it); the Kustomize base's resource list;
 * the example overlay rendered (by a small strategic-merge renderer here, and by `kubectl
 * kustomize` too when kubectl is installed); and what the objects must say about this app:
 * probes on its real routes and ports, non-root, the migrate command, selectors that select,
 * secrets that exist or are documented placeholders, settings that are real config variables.
 */

type Obj = Record<string, any>;
const ROOT = 'deploy/k8s';
const BASE = `${ROOT}/base`;
const OVERLAY = `${ROOT}/overlays/example`;

// ------------------------------------------------------------------ schema validation

type ModelCtor = new (data: never) => { validate(): void };
const KINDS: Record<string, { model: ModelCtor; schema: (data: unknown) => boolean }> = {
  'v1/ConfigMap': { model: ConfigMap as unknown as ModelCtor, schema: configMapSchema },
  'v1/Namespace': { model: Namespace as unknown as ModelCtor, schema: namespaceSchema },
  'v1/Secret': { model: Secret as unknown as ModelCtor, schema: secretSchema },
  'v1/Service': { model: Service as unknown as ModelCtor, schema: serviceSchema },
  'v1/ServiceAccount': { model: ServiceAccount as unknown as ModelCtor, schema: serviceAccountSchema },
  'apps/v1/Deployment': { model: Deployment as unknown as ModelCtor, schema: deploymentSchema },
  'batch/v1/Job': { model: Job as unknown as ModelCtor, schema: jobSchema },
  'policy/v1/PodDisruptionBudget': { model: PodDisruptionBudget as unknown as ModelCtor, schema: pdbSchema },
  'networking.k8s.io/v1/Ingress': { model: Ingress as unknown as ModelCtor, schema: ingressSchema },
};

/**
 * Fields the schema does not know. The bundled validators are compiled Ajv code that reads
 * exactly the properties its schema declares (and iterates maps such as labels), so a property
 * the validator never touched is not in the schema.
 */
function unknownFields(obj: Obj, schema: (data: unknown) => boolean): string[] {
  const read = new WeakMap<object, Set<string>>();
  const proxies = new WeakMap<object, object>();
  const wrap = (v: unknown): unknown => {
    if (!v || typeof v !== 'object') return v;
    const cached = proxies.get(v);
    if (cached) return cached;
    const keys = new Set<string>();
    read.set(v, keys);
    const p = new Proxy(v, {
      get: (t, k, r) => {
        if (typeof k === 'string') keys.add(k);
        return wrap(Reflect.get(t, k, r));
      },
      has: (t, k) => {
        if (typeof k === 'string') keys.add(k);
        return Reflect.has(t, k);
      },
    });
    proxies.set(v, p);
    return p;
  };
  schema(wrap(obj));
  const out: string[] = [];
  const walk = (v: unknown, at: string) => {
    if (!v || typeof v !== 'object') return;
    const keys = read.get(v);
    for (const [k, child] of Object.entries(v)) {
      const here = Array.isArray(v) ? `${at}[${k}]` : `${at}.${k}`;
      if (!Array.isArray(v) && keys && !keys.has(k)) out.push(here);
      else walk(child, here);
    }
  };
  walk(obj, '');
  return out;
}

/** Problems of one object: schema errors and unknown fields; [] when valid. */
function problems(obj: Obj): string[] {
  const kind = KINDS[`${obj?.apiVersion}/${obj?.kind}`];
  if (!kind) return [`no schema registered for ${obj?.apiVersion} ${obj?.kind} (add it to KINDS)`];
  const found: string[] = [];
  try {
    new kind.model(obj as never).validate();
  } catch (e) {
    found.push(e instanceof Error ? e.message : String(e));
  }
  for (const f of unknownFields(obj, kind.schema)) found.push(`unknown field ${f}`);
  return found;
}

// ------------------------------------------------------------------ loading

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? filesUnder(p) : [p];
  });
}

function loadYaml(file: string): Obj[] {
  const docs = parseAllDocuments(readFileSync(file, 'utf8'));
  for (const d of docs) if (d.errors.length > 0) throw new Error(`${file}: ${d.errors.map((e) => e.message).join('; ')}`);
  return docs.map((d) => d.toJS() as Obj).filter((o) => o !== null && o !== undefined);
}

function loadOne(file: string): Obj {
  const docs = loadYaml(file);
  expect(docs, file).toHaveLength(1);
  return docs[0]!;
}

/** KEY=value lines of a Kustomize env file; `# KEY=` lines are documented optional keys. */
function envFile(file: string): { values: Record<string, string>; documented: string[] } {
  const values: Record<string, string> = {};
  const documented: string[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const set = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (set) values[set[1]!] = set[2]!;
    const doc = /^#\s*([A-Z][A-Z0-9_]*)=\s*$/.exec(line.trim());
    if (doc) documented.push(doc[1]!);
  }
  return { values, documented };
}

const yamlFiles = filesUnder(ROOT).filter((f) => /\.ya?ml$/.test(f));
const isKustomization = (f: string) => path.basename(f) === 'kustomization.yaml';
const baseKustomization = loadOne(`${BASE}/kustomization.yaml`);
const overlayKustomization = loadOne(`${OVERLAY}/kustomization.yaml`);
const baseObjects = (baseKustomization.resources as string[]).map((r) => ({ file: r, obj: loadOne(path.join(BASE, r)) }));
const find = (objs: Obj[], kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata?.name === name);
const byKind = (objs: Obj[], kind: string) => objs.filter((o) => o.kind === kind);
const base = baseObjects.map((b) => b.obj);

/** Pod templates of the workloads (Deployment, Job). */
function podTemplates(objs: Obj[]): Array<{ owner: Obj; spec: Obj; labels: Record<string, string> }> {
  return objs.filter((o) => o.kind === 'Deployment' || o.kind === 'Job').map((o) => ({ owner: o, spec: o.spec.template.spec, labels: o.spec.template.metadata?.labels ?? {} }));
}
const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

// ------------------------------------------------------------------ a small Kustomize renderer

/** Strategic merge as far as these manifests use it: maps merge, lists of named items merge by name, null deletes. */
function strategicMerge(target: unknown, patch: unknown): unknown {
  if (Array.isArray(target) && Array.isArray(patch) && patch.every((p) => p && typeof p === 'object' && 'name' in p)) {
    const out = target.map((t) => structuredClone(t));
    for (const p of patch as Obj[]) {
      const i = out.findIndex((t) => (t as Obj).name === p.name);
      if (i >= 0) out[i] = strategicMerge(out[i], p);
      else out.push(structuredClone(p));
    }
    return out;
  }
  if (target && patch && typeof target === 'object' && typeof patch === 'object' && !Array.isArray(target) && !Array.isArray(patch)) {
    const out: Obj = structuredClone(target);
    for (const [k, v] of Object.entries(patch)) {
      if (v === null) delete out[k];
      else out[k] = k in out ? strategicMerge(out[k], v) : structuredClone(v);
    }
    return out;
  }
  return structuredClone(patch);
}

function applyImages(objs: Obj[], images: Array<{ name: string; newName?: string; newTag?: string; digest?: string }> = []): void {
  for (const { spec } of podTemplates(objs))
    for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
      const [name, tag] = String(c.image).split(/:(?=[^/]*$)/);
      const rule = images.find((i) => i.name === name);
      if (rule) c.image = `${rule.newName ?? name}${rule.digest ? `@${rule.digest}` : `:${rule.newTag ?? tag ?? 'latest'}`}`;
    }
}

const CLUSTER_SCOPED = new Set(['Namespace']);

/** Render a kustomization directory (resources, namespace, images, replicas, patches, secretGenerator without the name hash). */
function render(dir: string): Obj[] {
  const k = loadOne(path.join(dir, 'kustomization.yaml'));
  const objs: Obj[] = [];
  for (const r of k.resources ?? []) {
    const p = path.join(dir, r);
    objs.push(...(statSync(p).isDirectory() ? render(p) : loadYaml(p).map((o) => structuredClone(o))));
  }
  for (const g of k.secretGenerator ?? []) {
    const data: Record<string, string> = {};
    for (const f of g.envs ?? []) for (const [key, v] of Object.entries(envFile(path.join(dir, f)).values)) data[key] = Buffer.from(v).toString('base64');
    objs.push({ apiVersion: 'v1', kind: 'Secret', type: 'Opaque', metadata: { name: g.name, labels: g.options?.labels }, data });
  }
  for (const p of k.patches ?? []) {
    const patch = loadOne(path.join(dir, p.path));
    const i = objs.findIndex((o) => o.kind === patch.kind && o.metadata?.name === patch.metadata?.name);
    if (i < 0) throw new Error(`${dir}: patch ${p.path} targets ${patch.kind}/${patch.metadata?.name}, which is not in its resources`);
    objs[i] = strategicMerge(objs[i], patch) as Obj;
  }
  for (const r of k.replicas ?? []) {
    const d = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === r.name);
    if (!d) throw new Error(`${dir}: replicas for ${r.name}, which is not a Deployment here`);
    d.spec.replicas = r.count;
  }
  applyImages(objs, k.images);
  if (k.namespace) for (const o of objs) if (!CLUSTER_SCOPED.has(o.kind)) o.metadata.namespace = k.namespace;
  return objs;
}

function kubectlAvailable(): boolean {
  try {
    execFileSync('kubectl', ['version', '--client'], { stdio: 'ignore', timeout: 10_000 });
    return true;
  } catch {
    return false;
  }
}

// ------------------------------------------------------------------ the app's own facts

const apiRoutes = new Set(
  Object.getOwnPropertyNames(HealthController.prototype)
    .filter((m) => m !== 'constructor')
    .map((m) => Reflect.getMetadata('path', (HealthController.prototype as unknown as Record<string, object>)[m]!) as string | undefined)
    .filter((p): p is string => typeof p === 'string')
    .map((p) => `/${p.replace(/^\//, '')}`),
);
if (/fastify\.get\('\/metrics'/.test(readFileSync('apps/api/src/common/http-metrics.ts', 'utf8'))) apiRoutes.add('/metrics');
const workerRoutes = new Set([...readFileSync('apps/worker/src/metrics.server.ts', 'utf8').matchAll(/req\.url [!=]== '(\/[a-z]+)'/g)].map((m) => m[1]!));
const configKeys = new Set(Object.keys(ConfigSchema.shape));
const configMap = find(base, 'ConfigMap', 'aaas-config')!;
const secretEnv = envFile(`${OVERLAY}/secrets.example.env`);
/** Realistic stand-ins for the Secret's values (the example file holds placeholders). */
const realSecrets = {
  DATABASE_URL: 'postgresql://aaas:s3cret@db.internal:5432/aaas',
  REDIS_URL: 'rediss://:s3cret@redis.internal:6380',
  PAGE_TOKEN_SECRET: 'a-page-token-secret-of-32-characters',
  SIGNING_KEY_ENCRYPTION_SECRET: 'a-signing-key-secret-of-32-chars',
};
const isSecretSetting = (k: string) => /SECRET|_KEY$|^DATABASE_URL$|^REDIS_URL$/.test(k);
const container = (objs: Obj[], kind: string, name: string) => find(objs, kind, name)!.spec.template.spec.containers[0] as Obj;
const envOf = (c: Obj) => Object.fromEntries((c.env ?? []).filter((e: Obj) => 'value' in e).map((e: Obj) => [e.name, String(e.value)]));
const setting = (c: Obj, key: keyof typeof ConfigSchema.shape) => ConfigSchema.parse({ ...configMap.data, ...realSecrets, ...envOf(c) })[key];

// ------------------------------------------------------------------ tests

describe('Kubernetes manifests (deploy/k8s)', () => {
  it('every YAML file parses, and the base kustomization lists exactly the files of the base', () => {
    expect(yamlFiles.length).toBeGreaterThan(5);
    for (const f of yamlFiles) expect(() => loadYaml(f), f).not.toThrow();
    const listed = (baseKustomization.resources as string[]).map((r) => path.normalize(r)).sort();
    for (const r of listed) expect(existsSync(path.join(BASE, r)), `${r} is listed but missing`).toBe(true);
    const present = readdirSync(BASE).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml').sort();
    expect(listed).toEqual(present);
    expect(new Set(listed).size).toBe(listed.length);
  });

  it('kustomization files use only known fields, and the overlay points at what exists', () => {
    const known = new Set(['apiVersion', 'kind', 'namespace', 'resources', 'images', 'replicas', 'patches', 'secretGenerator', 'configMapGenerator', 'labels', 'components']);
    for (const f of yamlFiles.filter(isKustomization)) {
      const k = loadOne(f);
      expect(k.apiVersion, f).toBe('kustomize.config.k8s.io/v1beta1');
      expect(k.kind, f).toBe('Kustomization');
      expect(Object.keys(k).filter((key) => !known.has(key)), f).toEqual([]);
    }
    for (const r of overlayKustomization.resources) expect(existsSync(path.join(OVERLAY, r)), r).toBe(true);
    for (const p of overlayKustomization.patches) expect(existsSync(path.join(OVERLAY, p.path)), p.path).toBe(true);
    for (const g of overlayKustomization.secretGenerator) for (const f of g.envs) expect(existsSync(path.join(OVERLAY, f)), f).toBe(true);
  });

  it('every object of the base and of the overlay is valid against the Kubernetes schema, with no unknown field', () => {
    const patchFiles = new Set((overlayKustomization.patches as Obj[]).map((p) => path.join(OVERLAY, p.path)));
    const resources = yamlFiles.filter((f) => !isKustomization(f) && !patchFiles.has(f));
    const found = resources.flatMap((f) => loadYaml(f).flatMap((o) => problems(o).map((p) => `${f} ${o.kind}/${o.metadata?.name}: ${p}`)));
    expect(found).toEqual([]);
    expect(resources.length).toBeGreaterThanOrEqual(baseObjects.length);
  });

  it('the rendered example overlay is valid too: patches, replicas, image, namespace and the generated Secret applied', () => {
    const out = render(OVERLAY);
    expect(out.flatMap((o) => problems(o).map((p) => `${o.kind}/${o.metadata?.name}: ${p}`))).toEqual([]);
    expect(find(out, 'Deployment', 'aaas-api')!.spec.replicas).toBe(3);
    expect(find(out, 'ConfigMap', 'aaas-config')!.data.PUBLIC_BASE_URL).toMatch(/^https:\/\//);
    for (const { spec } of podTemplates(out)) for (const c of spec.containers) expect(c.image).toBe('ghcr.io/example/aaas:0.1.0');
    for (const o of out) if (o.kind !== 'Namespace') expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe('aaas');
    expect(find(out, 'Secret', 'aaas-secrets')).toBeDefined();
  });

  it.skipIf(!kubectlAvailable())('kubectl kustomize renders the overlay into valid objects whose secret references resolve', () => {
    const out = parseAllDocuments(execFileSync('kubectl', ['kustomize', OVERLAY], { encoding: 'utf8', timeout: 60_000 })).map((d) => d.toJS() as Obj);
    // kustomize wraps long base64 values at 70 columns; the API server's decoder skips the line
    // breaks, the schema's `byte` format does not
    for (const s of byKind(out, 'Secret')) for (const k of Object.keys(s.data ?? {})) s.data[k] = String(s.data[k]).replace(/\s+/g, '');
    expect(out.flatMap((o) => problems(o).map((p) => `${o.kind}/${o.metadata?.name}: ${p}`))).toEqual([]);
    const secrets = new Set(byKind(out, 'Secret').map((s) => s.metadata.name));
    for (const { owner, spec } of podTemplates(out))
      for (const c of spec.containers) {
        for (const e of c.envFrom ?? []) if (e.secretRef && !e.secretRef.optional) expect(secrets.has(e.secretRef.name), `${owner.metadata.name}: ${e.secretRef.name}`).toBe(true);
        for (const e of c.env ?? []) if (e.valueFrom?.secretKeyRef) expect(secrets.has(e.valueFrom.secretKeyRef.name), `${owner.metadata.name}: ${e.valueFrom.secretKeyRef.name}`).toBe(true);
        expect(c.image).toBe('ghcr.io/example/aaas:0.1.0');
      }
  });

  it('the validator refuses what Kubernetes refuses: a string replica count, a typo in a field name, an unknown kind', () => {
    const api = structuredClone(find(base, 'Deployment', 'aaas-api')!);
    expect(problems(api)).toEqual([]);
    const stringReplicas = strategicMerge(api, { spec: { replicas: '3' } }) as Obj;
    expect(problems(stringReplicas).join('\n')).toMatch(/spec\/replicas must be integer/);
    const typo = structuredClone(api);
    typo.spec.template.spec.containers[0].readinessProbe.periodSecond = 5;
    expect(problems(typo)).toEqual(['unknown field .spec.template.spec.containers[0].readinessProbe.periodSecond']);
    const noSelector = structuredClone(api);
    delete noSelector.spec.selector;
    expect(problems(noSelector).join('\n')).toMatch(/spec must have required property '?selector'?/);
    const badProbePort = structuredClone(api);
    badProbePort.spec.template.spec.containers[0].ports[0].containerPort = 'http';
    expect(problems(badProbePort).join('\n')).toMatch(/containerPort must be integer/);
    expect(problems({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } })).toEqual([expect.stringMatching(/no schema registered/)]);
  });

  it('API probes and scrape annotations point at the API’s real routes and port', () => {
    expect(apiRoutes).toEqual(new Set(['/healthz', '/readyz', '/healthz/dependencies', '/metrics']));
    const d = find(base, 'Deployment', 'aaas-api')!;
    const c = container(base, 'Deployment', 'aaas-api');
    const port = c.ports.find((p: Obj) => p.name === 'http');
    expect(port.containerPort).toBe(setting(c, 'PORT'));
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(c.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    const a = d.spec.template.metadata.annotations;
    expect(a['prometheus.io/scrape']).toBe('true');
    expect(Number(a['prometheus.io/port'])).toBe(port.containerPort);
    expect(apiRoutes.has(a['prometheus.io/path'])).toBe(true);
    expect(c.args).toEqual(['node', 'dist/apps/api/src/main.js']);
  });

  it('the API opens its gRPC listener on the port the pod and the Service name (GRPC_PORT)', () => {
    const c = container(base, 'Deployment', 'aaas-api');
    const grpcPort = c.ports.find((p: Obj) => p.name === 'grpc');
    expect(grpcPort.containerPort).toBe(setting(c, 'GRPC_PORT'));
    const svc = find(base, 'Service', 'aaas-api')!;
    expect(svc.spec.ports.find((p: Obj) => p.name === 'grpc')).toMatchObject({ targetPort: 'grpc', appProtocol: 'grpc' });
  });

  it('worker probes use the port the worker really opens (WORKER_METRICS_PORT on 0.0.0.0) and its real routes', () => {
    expect(workerRoutes).toEqual(new Set(['/healthz', '/readyz', '/metrics']));
    const d = find(base, 'Deployment', 'aaas-worker')!;
    const c = container(base, 'Deployment', 'aaas-worker');
    const port = c.ports.find((p: Obj) => p.name === 'metrics');
    expect(setting(c, 'WORKER_METRICS_PORT')).toBe(port.containerPort);
    expect(setting(c, 'WORKER_METRICS_HOST')).toBe('0.0.0.0');
    for (const probe of [c.readinessProbe, c.livenessProbe, c.startupProbe]) {
      expect(probe.httpGet.port).toBe('metrics');
      expect(workerRoutes.has(probe.httpGet.path)).toBe(true);
    }
    expect(c.readinessProbe.httpGet.path).toBe('/readyz');
    expect(c.livenessProbe.httpGet.path).toBe('/healthz');
    const a = d.spec.template.metadata.annotations;
    expect(Number(a['prometheus.io/port'])).toBe(port.containerPort);
    expect(a['prometheus.io/path']).toBe('/metrics');
    expect(c.args).toEqual(['node', 'dist/apps/worker/src/main.js']);
  });

  it('the migration Job runs node scripts/migrate.mjs from the image, once, with the database URL from the Secret', () => {
    const job = find(base, 'Job', 'aaas-migrate')!;
    const c = job.spec.template.spec.containers[0];
    expect(c.args).toEqual(['node', 'scripts/migrate.mjs']);
    expect(c.command).toBeUndefined();
    expect(existsSync('scripts/migrate.mjs')).toBe(true);
    expect(readFileSync('Dockerfile', 'utf8')).toMatch(/^COPY --from=build \S+ \/app\/scripts \.\/scripts$/m);
    expect(job.spec.template.spec.restartPolicy).toBe('Never');
    expect(c.env.find((e: Obj) => e.name === 'DATABASE_URL').valueFrom.secretKeyRef).toEqual({ name: 'aaas-secrets', key: 'DATABASE_URL' });
  });

  it('every workload keeps tini as PID 1 (args, not command) and uses the one image', () => {
    const images = baseKustomization.images as Obj[];
    for (const { owner, spec } of podTemplates(base))
      for (const c of spec.containers) {
        expect(c.command, owner.metadata.name).toBeUndefined();
        expect(c.image, owner.metadata.name).toBe('aaas');
      }
    expect(images).toEqual([{ name: 'aaas', newName: 'ghcr.io/example/aaas', newTag: '0.1.0' }]);
    expect(readFileSync('Dockerfile', 'utf8')).toMatch(/ENTRYPOINT \["\/usr\/bin\/tini", "--"\]/);
  });

  it('every pod runs as the image’s node user (uid 1000), read-only, unprivileged, with requests and limits', () => {
    const templates = podTemplates(base);
    expect(templates.map((t) => t.owner.metadata.name).sort()).toEqual(['aaas-api', 'aaas-migrate', 'aaas-worker']);
    for (const { owner, spec } of templates) {
      const at = owner.metadata.name;
      expect(spec.securityContext, at).toMatchObject({ runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000 });
      expect(spec.automountServiceAccountToken, at).toBe(false);
      expect(find(base, 'ServiceAccount', spec.serviceAccountName), at).toBeDefined();
      for (const c of spec.containers) {
        expect(c.securityContext, at).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, runAsUser: 1000, capabilities: { drop: ['ALL'] } });
        for (const r of ['cpu', 'memory']) {
          expect(c.resources.requests[r], `${at} requests.${r}`).toBeDefined();
          expect(c.resources.limits[r], `${at} limits.${r}`).toBeDefined();
        }
        // the root filesystem is read-only: /tmp is the one writable place
        const tmp = c.volumeMounts.find((m: Obj) => m.mountPath === '/tmp');
        expect(spec.volumes.find((v: Obj) => v.name === tmp?.name)?.emptyDir, at).toBeDefined();
      }
    }
    expect(readFileSync('Dockerfile', 'utf8')).toMatch(/^USER node$/m);
  });

  it('Deployments select their own pods; the Service selects the API pods on a port they open; each PDB selects exactly one Deployment', () => {
    const deployments = byKind(base, 'Deployment');
    for (const d of deployments) expect(selects(d.spec.selector.matchLabels, d.spec.template.metadata.labels), d.metadata.name).toBe(true);
    const api = find(base, 'Deployment', 'aaas-api')!;
    const svc = find(base, 'Service', 'aaas-api')!;
    expect(selects(svc.spec.selector, api.spec.template.metadata.labels)).toBe(true);
    expect(deployments.filter((d) => selects(svc.spec.selector, d.spec.template.metadata.labels))).toHaveLength(1);
    const portNames = api.spec.template.spec.containers.flatMap((c: Obj) => c.ports.map((p: Obj) => p.name));
    for (const p of svc.spec.ports) expect(portNames).toContain(p.targetPort);
    const pdbs = byKind(base, 'PodDisruptionBudget');
    expect(pdbs.map((p) => p.metadata.name).sort()).toEqual(['aaas-api', 'aaas-worker']);
    for (const pdb of pdbs) {
      const matched = podTemplates(base).filter((t) => selects(pdb.spec.selector.matchLabels, t.labels));
      expect(matched.map((t) => t.owner.metadata.name), pdb.metadata.name).toEqual([pdb.metadata.name]);
    }
    const ingress = find(render(OVERLAY), 'Ingress', 'aaas-api')!;
    const backend = ingress.spec.rules[0].http.paths[0].backend.service;
    expect(backend.name).toBe(svc.metadata.name);
    expect(svc.spec.ports.map((p: Obj) => p.name)).toContain(backend.port.name);
  });

  it('termination grace covers the preStop drain and the longest request (API) and an in-flight push attempt (worker)', () => {
    const api = find(base, 'Deployment', 'aaas-api')!.spec.template.spec;
    const c = api.containers[0];
    expect(c.lifecycle.preStop.exec.command[0]).toBe('sleep');
    const preStop = Number(c.lifecycle.preStop.exec.command[1]);
    expect(preStop).toBeGreaterThanOrEqual(5);
    const longestRequestS = Number(setting(c, 'A2A_BLOCKING_TIMEOUT_MS')) / 1000;
    expect(api.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(preStop + longestRequestS + 5);
    const worker = find(base, 'Deployment', 'aaas-worker')!.spec.template.spec;
    expect(worker.terminationGracePeriodSeconds).toBeGreaterThan(Number(setting(worker.containers[0], 'PUSH_TIMEOUT_MS')) / 1000);
  });

  it('every setting is a variable of config.ts; secrets are not in the ConfigMap; the settings parse', () => {
    const keys = [
      ...Object.keys(configMap.data),
      ...Object.keys(secretEnv.values),
      ...secretEnv.documented,
      ...podTemplates(base).flatMap(({ spec }) => spec.containers.flatMap((c: Obj) => (c.env ?? []).map((e: Obj) => e.name))),
    ].filter((k) => !['HOME', 'JITI_FS_CACHE'].includes(k));
    expect(keys.filter((k) => !configKeys.has(k))).toEqual([]);
    expect(Object.keys(configMap.data).filter(isSecretSetting)).toEqual([]);
    for (const k of Object.keys(secretEnv.values)) expect(isSecretSetting(k), k).toBe(true);
    for (const required of ['DATABASE_URL', 'REDIS_URL', 'PAGE_TOKEN_SECRET', 'SIGNING_KEY_ENCRYPTION_SECRET']) expect(Object.keys(secretEnv.values)).toContain(required);
    for (const { spec } of podTemplates(base))
      for (const c of spec.containers) expect(ConfigSchema.safeParse({ ...configMap.data, ...realSecrets, ...envOf(c) }).success).toBe(true);
    const rendered = find(render(OVERLAY), 'ConfigMap', 'aaas-config')!;
    expect(ConfigSchema.safeParse({ ...rendered.data, ...realSecrets }).success).toBe(true);
  });

  it('the auth-failure limiter is on in the base and the overlay; the overlay trusts the ingress (TRUST_PROXY) and turns the per-address limit back on', () => {
    const baseSettings = ConfigSchema.parse({ ...configMap.data, ...realSecrets });
    expect(baseSettings.RATE_LIMIT_AUTH_FAILURES_PER_IP).toBeGreaterThan(0);
    expect(baseSettings.RATE_LIMIT_PER_KEY).toBeGreaterThan(0);
    const rendered = find(render(OVERLAY), 'ConfigMap', 'aaas-config')!;
    const settings = ConfigSchema.parse({ ...rendered.data, ...realSecrets });
    expect(settings.RATE_LIMIT_AUTH_FAILURES_PER_IP).toBeGreaterThan(0);
    expect(settings.RATE_LIMIT_AUTH_FAILURES_PER_IP).toBeLessThanOrEqual(100);
    expect(settings.RATE_LIMIT_PER_IP).toBeGreaterThan(0);
    expect(settings.RATE_LIMIT_PER_KEY).toBeGreaterThan(0);
    // a list of CIDRs (not `true`, which would believe any client's X-Forwarded-For), each valid
    expect(Array.isArray(settings.TRUST_PROXY)).toBe(true);
    const cidrs = settings.TRUST_PROXY as string[];
    expect(cidrs.length).toBeGreaterThan(0);
    for (const c of cidrs) expect(ipaddr.isValidCIDR(c), c).toBe(true);
    // and the processes are started with it: the API pods read the ConfigMap
    const api = find(render(OVERLAY), 'Deployment', 'aaas-api')!.spec.template.spec.containers[0];
    expect(api.envFrom.some((e: Obj) => e.configMapRef?.name === 'aaas-config')).toBe(true);
  });

  it('the example Secret holds placeholders that stop the processes at boot until replaced', () => {
    const parsed = ConfigSchema.safeParse({ ...configMap.data, ...secretEnv.values });
    expect(parsed.success).toBe(false);
    const failing = new Set(parsed.error!.issues.map((i) => i.path.join('.')));
    expect(failing).toEqual(new Set(['PAGE_TOKEN_SECRET', 'SIGNING_KEY_ENCRYPTION_SECRET']));
    for (const v of Object.values(secretEnv.values)) expect(v).toMatch(/CHANGE_ME/);
  });

  it('every Secret and ConfigMap a pod references exists in the base, is generated by the overlay, or is optional', () => {
    const generated = new Map((overlayKustomization.secretGenerator as Obj[]).map((g) => [g.name, new Set(g.envs.flatMap((f: string) => Object.keys(envFile(path.join(OVERLAY, f)).values)))]));
    const secretExists = (name: string) => generated.has(name) || find(base, 'Secret', name) !== undefined;
    for (const { owner, spec } of podTemplates(base))
      for (const c of spec.containers) {
        for (const e of c.envFrom ?? []) {
          if (e.configMapRef) expect(find(base, 'ConfigMap', e.configMapRef.name), owner.metadata.name).toBeDefined();
          if (e.secretRef) expect(secretExists(e.secretRef.name) || e.secretRef.optional === true, `${owner.metadata.name}: ${e.secretRef.name}`).toBe(true);
        }
        for (const e of c.env ?? []) {
          const ref = e.valueFrom?.secretKeyRef;
          if (ref) expect(generated.get(ref.name)?.has(ref.key), `${owner.metadata.name}: ${ref.name}/${ref.key}`).toBe(true);
        }
      }
  });

  it('the worker gets no Secret shared across organizations: only the platform Secret, no runtime-secrets object (they are per organization, encrypted in the database)', () => {
    for (const objs of [base, render(OVERLAY)]) {
      const worker = find(objs, 'Deployment', 'aaas-worker')!.spec.template.spec;
      const secretNames = [
        ...worker.containers.flatMap((c: Obj) => [...(c.envFrom ?? []).map((e: Obj) => e.secretRef?.name), ...(c.env ?? []).map((e: Obj) => e.valueFrom?.secretKeyRef?.name)]),
        ...(worker.volumes ?? []).map((v: Obj) => v.secret?.secretName),
      ].filter(Boolean);
      expect(secretNames.every((n: string) => n === 'aaas-secrets'), secretNames.join(',')).toBe(true);
      expect(JSON.stringify(worker)).not.toContain('aaas-runtime-secrets');
      expect(find(objs, 'Secret', 'aaas-runtime-secrets')).toBeUndefined();
    }
  });
});
