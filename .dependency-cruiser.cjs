/** Layer rules (house style): checked by `npm run lint`. */
module.exports = {
  forbidden: [
    { name: 'libs-not-apps', severity: 'error', comment: 'libs never import apps', from: { path: '^libs/' }, to: { path: '^apps/' } },
    { name: 'apps-independent', severity: 'error', comment: 'the api and worker apps share only libs', from: { path: '^apps/api/' }, to: { path: '^apps/worker/' } },
    { name: 'worker-not-api', severity: 'error', from: { path: '^apps/worker/' }, to: { path: '^apps/api/' } },
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
    // Which lib may use which (docs/architecture.md, "Layer rules"): each lib lists what it must NOT reach.
    ...[
      ['common', ['config', 'db', 'runs', 'runtimes', 'registry', 'execution', 'a2a']],
      ['config', ['common', 'db', 'runs', 'runtimes', 'registry', 'execution', 'a2a']],
      ['db', ['runs', 'runtimes', 'registry', 'execution', 'a2a']],
      ['runtimes', ['db', 'runs', 'registry', 'execution', 'a2a']],
      ['runs', ['runtimes', 'registry', 'execution', 'a2a']],
      ['registry', ['runs', 'execution', 'a2a']],
      ['execution', ['registry', 'a2a']],
      ['a2a', ['execution']],
    ].map(([lib, banned]) => ({
      name: `lib-${lib}-layer`,
      severity: 'error',
      comment: `libs/${lib} may not use ${banned.join(', ')}`,
      from: { path: `^libs/${lib}/` },
      to: { path: `^libs/(${banned.join('|')})/` },
    })),
    {
      name: 'db-in-repositories-only',
      severity: 'error',
      comment: 'only repositories (and module wiring) use the database service; services get plain types and AppErrors',
      from: { path: '^(apps|libs)/', pathNot: ['^libs/db/', '\\.repository\\.ts$', '\\.module\\.ts$'] },
      to: { path: '^libs/db/src/index\\.ts$' },
    },
    {
      name: 'worker-wires-only',
      severity: 'error',
      comment: 'apps/worker only wires BullMQ to libs/execution: no run, runtime, registry or A2A logic there',
      from: { path: '^apps/worker/', pathNot: '\\.module\\.ts$' },
      to: { path: '^libs/(runs|runtimes|registry|a2a|db)/' },
    },
  ],
  options: {
    doNotFollow: { path: ['node_modules', 'libs/db/src/generated/'] },
    exclude: { path: '\\.spec\\.ts$' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { conditionNames: ['source', 'import', 'node', 'default'], exportsFields: ['exports'], mainFields: ['module', 'main'] },
  },
};
