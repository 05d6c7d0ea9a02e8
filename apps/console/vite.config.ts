import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * The operator console: a Preact single-page app over the admin API, served by the API at
 * /console (apps/api/src/console). Built to dist/console by `npm run build` (scripts/setup.mjs).
 * No CDN: every script and style is bundled, so the console works offline and under a strict CSP.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/console/',
  // JSX through Vite's own transformer, with Preact's automatic runtime (no Babel preset)
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  // `#libs/trust` (Agent Card verification, jose) from its TypeScript source, as the tests load it
  resolve: { conditions: ['aaas-source', 'browser', 'module', 'import', 'default'] },
  build: {
    outDir: fileURLToPath(new URL('../../dist/console', import.meta.url)),
    emptyOutDir: true,
    sourcemap: true,
    // no inline <script>/<style> (the CSP allows 'self' only) and no base64-inlined assets
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 400,
  },
});
