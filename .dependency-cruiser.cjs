/** Layer rules (house style): checked by `npm run lint`. */
const { readFileSync, readdirSync } = require('node:fs');
const path = require('node:path');

/**
 * The lib rules, one allow-list per lib, read from the table of docs/architecture.md: a row
 * `| a, b | x, y (note) |` says libs a and b may use x and y (any word of the row outside
 * parentheses that names a lib under libs/ counts; "nothing of ours" names none). A lib with no row may use no other lib. The
 * table is the rule: change it, and the lint follows.
 */
function layerRules() {
  const libs = readdirSync(path.join(__dirname, 'libs'), { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
  const doc = readFileSync(path.join(__dirname, 'docs/architecture.md'), 'utf8');
  const at = doc.indexOf('| lib | may use |');
  if (at < 0) throw new Error('docs/architecture.md: the "| lib | may use |" table is missing');
  const allowed = new Map(libs.map((l) => [l, new Set()]));
  for (const line of doc.slice(at).split('\n').slice(2)) {
    if (!line.startsWith('|')) break;
    const [, who, uses] = line.split('|').map((c) => c.trim());
    // words in parentheses are notes ("trust: jose"), not grants
    const words = (text) => (text.replace(/\([^)]*\)/g, '').match(/[a-z0-9-]+/g) ?? []).filter((w) => allowed.has(w));
    for (const lib of words(who)) for (const used of words(uses)) allowed.get(lib).add(used);
  }
  return libs.map((lib) => {
    const ok = [lib, ...allowed.get(lib)];
    return {
      name: `lib-${lib}-layer`,
      severity: 'error',
      comment: `libs/${lib} may use only ${ok.length > 1 ? ok.slice(1).join(', ') : 'no other lib'} (docs/architecture.md)`,
      from: { path: `^libs/${lib}/` },
      to: { path: `^libs/(?!(${ok.join('|')})/)` },
    };
  });
}

module.exports = {
  forbidden: [
    { name: 'libs-not-apps', severity: 'error', comment: 'libs never import apps', from: { path: '^libs/' }, to: { path: '^apps/' } },
    { name: 'apps-independent', severity: 'error', comment: 'the api and worker apps share only libs', from: { path: '^apps/api/' }, to: { path: '^apps/worker/' } },
    { name: 'worker-not-api', severity: 'error', from: { path: '^apps/worker/' }, to: { path: '^apps/api/' } },
    { name: 'cli-independent', severity: 'error', comment: 'the CLI talks to the service over HTTP and uses only framework-free libs', from: { path: '^apps/cli/' }, to: { path: ['^apps/(api|worker)/', '^libs/(db|runs|registry|execution|a2a|metrics|push)/'] } },
    {
      name: 'lib-surface-only',
      severity: 'error',
      comment: 'a lib talks to another lib through its index.ts only',
      from: { path: '^libs/([^/]+)/' },
      to: { path: '^libs/([^/]+)/src/.+', pathNot: ['^libs/$1/', '^libs/[^/]+/src/index\\.ts$'] },
    },
    {
      name: 'apps-use-lib-surface',
      severity: 'error',
      from: { path: '^apps/' },
      to: { path: '^libs/[^/]+/src/.+', pathNot: '^libs/[^/]+/src/index\\.ts$' },
    },
    {
      name: 'prisma-in-db-only',
      severity: 'error',
      comment: 'only libs/db touches the Prisma client; other code goes through repositories',
      from: { path: '^(apps|libs)/', pathNot: '^libs/db/' },
      to: { path: ['^libs/db/src/generated/', 'node_modules/@prisma/', 'node_modules/\\.prisma/'] },
    },
    {
      name: 'contracts-framework-free',
      severity: 'error',
      comment: 'contracts are zod schemas only: no Nest, no Prisma, no other lib',
      from: { path: '^libs/contracts/' },
      to: { path: ['node_modules/@nestjs/', 'node_modules/@prisma/', '^libs/(?!contracts/)'] },
    },
    { name: 'no-circular', severity: 'error', from: { path: '^(apps|libs)/' }, to: { circular: true } },
    // Which lib may use which: generated from the table in docs/architecture.md ("| lib | may use |"),
    // as allow-lists — a lib may reach only the libs its row names (and itself).
    ...layerRules(),
    {
      name: 'telemetry-users',
      severity: 'error',
      comment: 'spans are made at the edges (apps), around statements (db), at dispatch (runs) and for A2A attributes (a2a) only',
      from: { path: '^libs/', pathNot: '^libs/(telemetry|db|runs|a2a)/' },
      to: { path: '^libs/telemetry/' },
    },
    {
      name: 'otel-in-telemetry-only',
      severity: 'error',
      comment: 'only libs/telemetry touches @opentelemetry/*; others use its helpers',
      from: { path: '^(apps|libs)/', pathNot: '^libs/telemetry/' },
      to: { path: 'node_modules/@opentelemetry/' },
    },
    {
      name: 'db-in-repositories-only',
      severity: 'error',
      comment: 'only repositories (and module wiring, and the edge that keeps read-your-writes for the read replica) use the database service; services get plain types and AppErrors',
      from: { path: '^(apps|libs)/', pathNot: ['^libs/db/', '\\.repository\\.ts$', '\\.module\\.ts$', '\\.health\\.ts$', '^apps/api/src/common/read-your-writes\\.ts$', '/health/health\\.controller\\.ts$', '/main\\.ts$', '/api\\.process\\.ts$', '/metrics\\.server\\.ts$'] },
      to: { path: '^libs/db/src/index\\.ts$' },
    },
    {
      name: 'worker-wires-only',
      severity: 'error',
      comment: 'apps/worker only wires BullMQ to libs/execution: no run, runtime, registry or A2A logic there',
      from: { path: '^apps/worker/', pathNot: ['\\.module\\.ts$', '/main\\.ts$', '/metrics\\.server\\.ts$'] },
      to: { path: '^libs/(runs|runtimes|registry|a2a|db)/' },
    },
  ],
  options: {
    doNotFollow: { path: ['node_modules', 'libs/db/src/generated/'] },
    exclude: { path: '\\.spec\\.ts$' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { conditionNames: ['aaas-source', 'import', 'node', 'default'], exportsFields: ['exports'], mainFields: ['module', 'main'] },
  },
};
