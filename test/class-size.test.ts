import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error — a plain ES module script, no declarations
import { MAX_PUBLIC_METHODS, allowedClasses, classSizeViolations, publicMethodsOf } from '../scripts/class-size.mjs';

/**
 * Issue 25: no class in apps/ or libs/ has more than 12 public methods, except where
 * docs/architecture.md says why (its section "Classes past twelve public methods").
 */
const root = path.resolve(import.meta.dirname, '..');

describe('class size', () => {
  it('counts public methods and accessors by name, not constructors, private, protected or # members', () => {
    const src = `export class A {
      constructor() {}
      one() {} two() {} get three() { return 1; } set three(v: number) {}
      private hidden() {} protected inherited() {} #secret() {}
      static four() {}
      five = () => 1;
    }`;
    const [a] = publicMethodsOf('a.ts', src) as Array<{ name: string; methods: string[] }>;
    expect(a.name).toBe('A');
    expect(a.methods.sort()).toEqual(['four', 'one', 'three', 'two']);
  });

  it('reads the allowed classes from the architecture document', () => {
    const allowed = allowedClasses('# x\n## Classes past twelve public methods\n\n| class | why |\n|---|---|\n| `Foo` | because |\n\n## Next\n| `Bar` | no |\n') as Set<string>;
    expect([...allowed]).toEqual(['Foo']);
  });

  it('flags a class past the limit that the document does not name', () => {
    const methods = Array.from({ length: MAX_PUBLIC_METHODS + 1 }, (_, i) => `m${i}() {}`).join(' ');
    const [big] = publicMethodsOf('big.ts', `class Big { ${methods} }`) as Array<{ methods: string[] }>;
    expect(big.methods.length).toBeGreaterThan(MAX_PUBLIC_METHODS);
  });

  it('holds on this tree', () => {
    expect(classSizeViolations(root)).toEqual([]);
    const doc = readFileSync(path.join(root, 'docs/architecture.md'), 'utf8');
    expect(doc).toContain('## Classes past twelve public methods');
  });
});
