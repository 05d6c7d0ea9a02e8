import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * The layer rules of docs/architecture.md are the lint's rules: `.dependency-cruiser.cjs` reads the
 * table ("| lib | may use |") and gives each lib an allow-list. These run the real `depcruise` on a
 * scratch tree laid out like ours, with imports the table forbids and allows.
 */
const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '..');
const depcruise = path.join(root, 'node_modules/.bin/depcruise');
const config = path.join(root, '.dependency-cruiser.cjs');
const scratch = mkdtempSync(path.join(tmpdir(), 'aaas-layers-'));

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Lay out `files` (path → source) under a fresh directory and cruise its libs/ with our config. */
async function cruise(name: string, files: Record<string, string>): Promise<{ code: number; out: string }> {
  const dir = path.join(scratch, name);
  for (const [file, text] of Object.entries({ 'tsconfig.json': '{"compilerOptions":{"module":"NodeNext","moduleResolution":"NodeNext"}}', ...files })) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  }
  try {
    const { stdout } = await run(depcruise, ['libs', '--config', config], { cwd: dir });
    return { code: 0, out: stdout };
  } catch (e) {
    const err = e as { code?: number; stdout?: string };
    return { code: err.code ?? -1, out: err.stdout ?? '' };
  }
}

describe('layer rules generated from docs/architecture.md', () => {
  it('refuses an import the table forbids (runs → a2a) and names the rule', async () => {
    const r = await cruise('forbidden', {
      'libs/a2a/src/index.ts': 'export const x = 1;\n',
      'libs/runs/src/bad.ts': "import { x } from '../../a2a/src/index.js';\nexport const y = x;\n",
    });
    expect(r.code).not.toBe(0);
    expect(r.out).toContain('lib-runs-layer: libs/runs/src/bad.ts → libs/a2a/src/index.ts');
  });

  it('refuses a lib the table does not name at all for it (trust may use nothing of ours)', async () => {
    const r = await cruise('unlisted', {
      'libs/config/src/index.ts': 'export const x = 1;\n',
      'libs/trust/src/bad.ts': "import { x } from '../../config/src/index.js';\nexport const y = x;\n",
    });
    expect(r.code).not.toBe(0);
    expect(r.out).toContain('lib-trust-layer');
  });

  it('allows what a row names (execution → runs, runs → db) through their index.ts', async () => {
    const r = await cruise('allowed', {
      'libs/db/src/index.ts': 'export const d = 1;\n',
      'libs/runs/src/run.repository.ts': "import { d } from '../../db/src/index.js';\nexport const x = d;\n",
      'libs/runs/src/index.ts': "export { x } from './run.repository.js';\n",
      'libs/execution/src/ok.ts': "import { x } from '../../runs/src/index.js';\nexport const y = x;\n",
    });
    expect(r.out).toContain('no dependency violations');
    expect(r.code).toBe(0);
  });
});
