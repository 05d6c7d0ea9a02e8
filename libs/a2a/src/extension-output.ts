import type { ExtensionMethod, ExtensionServices, Negotiated } from '#libs/extensions';
import type { ResolvedA2AAgent } from '#libs/registry';
import type { A2AOperations } from './a2a-operations.service.js';
import type { StreamItem } from './a2a-streams.service.js';
import type { A2ACaller, A2AProtocolVersion } from './a2a.types.js';
import { toV03Task } from './v03/v03.mapper.js';
import { toV1Task } from './v1/v1.mapper.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/*
 * What the extensions a request activated do to the A2A surface, for both bindings: their
 * `annotate` hooks on results and streams, and their methods (method extensions).
 */

/**
 * The `annotate` hooks of the extensions a request activated, applied to one A2A result of that
 * request (a Task, a stream event, a SendMessage response, a ListTasks page) in `version`'s shape:
 * status metadata (status-update events and tasks) and artifact metadata. A new object is returned;
 * `result` (and the log behind it) is left as it is. Without an annotating extension: `result`.
 */
export function annotateResult(result: unknown, negotiated: Negotiated | undefined, version: A2AProtocolVersion): unknown {
  const hooks = (negotiated?.plugins ?? []).filter((p) => p.plugin.annotate);
  if (hooks.length === 0 || !isObj(result)) return result;
  const apply = (target: 'status' | 'artifact', metadata: unknown): Obj => {
    let m: Obj = isObj(metadata) ? { ...metadata } : {};
    for (const { plugin, params } of hooks) m = plugin.annotate!(target, { ...m }, params);
    return m;
  };
  const artifact = (a: unknown) => (isObj(a) ? { ...a, metadata: apply('artifact', a.metadata) } : a);
  const task = (t: Obj): Obj => ({ ...t, metadata: apply('status', t.metadata), ...(Array.isArray(t.artifacts) ? { artifacts: t.artifacts.map(artifact) } : {}) });
  if (version === '1.0') {
    if (isObj(result.statusUpdate)) return { statusUpdate: { ...result.statusUpdate, metadata: apply('status', result.statusUpdate.metadata) } };
    if (isObj(result.artifactUpdate)) return { artifactUpdate: { ...result.artifactUpdate, artifact: artifact(result.artifactUpdate.artifact) } };
    if (isObj(result.task)) return { ...result, task: task(result.task) };
    if (Array.isArray(result.tasks)) return { ...result, tasks: result.tasks.map((t) => (isObj(t) ? task(t) : t)) };
    if (typeof result.id === 'string' && isObj(result.status)) return task(result);
    return result;
  }
  switch (result.kind) {
    case 'status-update':
      return { ...result, metadata: apply('status', result.metadata) };
    case 'artifact-update':
      return { ...result, artifact: artifact(result.artifact) };
    case 'task':
      return task(result);
    default:
      return result;
  }
}

/** A stream whose items pass through the activated extensions' `annotate` hooks. */
export async function* annotateStream(stream: AsyncIterable<StreamItem>, negotiated: Negotiated, version: A2AProtocolVersion): AsyncIterable<StreamItem> {
  for await (const item of stream) yield { ...item, result: annotateResult(item.result, negotiated, version) as StreamItem['result'] };
}

/** What the adapter offers extension methods, with results in `version`'s shapes. */
export function extensionServices(ops: A2AOperations, agent: ResolvedA2AAgent, caller: A2ACaller, version: A2AProtocolVersion): ExtensionServices {
  return {
    searchTasks: async (q) => {
      const r = await ops.searchTasks(agent, caller, q);
      return { tasks: r.views.map((v) => (version === '1.0' ? toV1Task(v) : toV03Task(v))), nextPageToken: r.nextPageToken };
    },
  };
}

/** The method `name` of an extension the request activated (method extensions), if any. */
export function extensionMethod(negotiated: Negotiated | undefined, name: string): ExtensionMethod | undefined {
  for (const { plugin } of negotiated?.plugins ?? []) {
    const m = plugin.methods && Object.hasOwn(plugin.methods, name) ? plugin.methods[name] : undefined;
    if (m) return m;
  }
  return undefined;
}
