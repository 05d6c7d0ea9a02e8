import swc from 'unplugin-swc';
import { defineConfig } from 'vitest/config';

// Tests run the TypeScript sources directly: the `aaas-source` condition (a name no dependency exports, unlike `source`) resolves `#libs/*` to
// libs/*/src/index.ts (package.json "imports"), and SWC keeps decorator metadata for Nest DI.
export default defineConfig({
  plugins: [swc.vite({ module: { type: 'es6' } })],
  resolve: { conditions: ['aaas-source'] },
  ssr: { resolve: { conditions: ['aaas-source'], externalConditions: ['aaas-source'] } },
  test: {
    include: ['libs/**/*.spec.ts', 'apps/**/*.spec.ts', 'test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/settle-leftover-runs.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
