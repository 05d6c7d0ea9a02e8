/**
 * The CLI's version: `version` of the package.json it ships in (found by walking up from this file,
 * so it is the same from apps/cli/src under tsx and from dist/apps/cli/src when built).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE_NAME = 'a2a-control-plane';

/** The package's version, e.g. `0.1.0`; `unknown` when no package.json of this package is found. */
export function packageVersion(from = path.dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === PACKAGE_NAME && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // no (readable) package.json here: look further up
    }
    if (path.dirname(dir) === dir) return 'unknown';
  }
}
