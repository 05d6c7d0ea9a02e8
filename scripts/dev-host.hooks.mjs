// Module resolution hooks of scripts/dev-host.mjs (registered with node:module's register()).
// A module under dist/ imported from a URL that carries `?v=<generation>` gets the same query, so each
// generation of the app is a fresh copy of every compiled module of ours, while node_modules (and the
// generated Prisma client, which changes only with prisma/schema.prisma) are loaded once per process.
let root = '';
let pinned = [];

export function initialize(data) {
  root = data.root;
  pinned = data.pinned;
}

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  const generation = context.parentURL?.startsWith(root) ? new URL(context.parentURL).searchParams.get('v') : null;
  if (generation === null || !resolved.url.startsWith(root) || pinned.some((p) => resolved.url.startsWith(p))) return resolved;
  const url = new URL(resolved.url);
  url.searchParams.set('v', generation);
  return { ...resolved, url: url.href };
}
