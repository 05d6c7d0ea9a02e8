// Module resolution hooks of scripts/dev-host.mjs (registered with node:module's register()).
// Every module under dist/ imported from a module under dist/ that carries `?v=` gets
// `?v=<the generation of its newest copy>`: the generation in which it, or a module it imports
// (transitively), last changed. The host says which files a generation changes (and waits for the
// answer) before it imports that generation's entry; importers are learnt from the resolutions
// seen so far. Modules outside dist/, and the pinned ones, keep their plain URL: loaded once.
let root = '';
let pinned = [];
/** Generation from which every module is fresh (a failed start reloads everything). */
let base = 1;
/** file URL (no query) → generation of its newest copy, when newer than `base`. */
const stamps = new Map();
/** file URL → the file URLs that import it. */
const importers = new Map();

export function initialize(data) {
  root = data.root;
  pinned = data.pinned;
  data.port.on('message', ({ generation, changed, all }) => {
    if (all) base = generation;
    const todo = [...changed];
    while (todo.length > 0) {
      const file = todo.pop();
      if (stamps.get(file) === generation) continue;
      stamps.set(file, generation);
      todo.push(...(importers.get(file) ?? []));
    }
    data.port.postMessage({ ack: generation });
  });
}

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  const parent = context.parentURL;
  if (!parent?.startsWith(root) || !parent.includes('?v=') || !resolved.url.startsWith(root) || pinned.some((p) => resolved.url.startsWith(p))) return resolved;
  const file = resolved.url.split('?')[0];
  const from = parent.split('?')[0];
  let set = importers.get(file);
  if (!set) importers.set(file, (set = new Set()));
  set.add(from);
  return { ...resolved, url: `${file}?v=${Math.max(base, stamps.get(file) ?? 0)}` };
}
