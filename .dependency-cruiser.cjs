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
  ],
  options: {
    doNotFollow: { path: ['node_modules', 'libs/db/src/generated/'] },
    exclude: { path: '\\.spec\\.ts$' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { conditionNames: ['source', 'import', 'node', 'default'], exportsFields: ['exports'], mainFields: ['module', 'main'] },
  },
};
