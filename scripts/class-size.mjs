#!/usr/bin/env node
// The class-size rule of docs/architecture.md ("Classes past twelve public methods"): no class in
// apps/ or libs/ has more than 12 public methods (methods and accessors, by name, constructors and
// `private`/`protected`/`#` members not counted), except the classes that section's table names with
// a reason. Run by `npm run lint`; `classSizeViolations` is what test/class-size.test.ts checks.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const MAX_PUBLIC_METHODS = 12;

/** Public method names per class declared in one source text: `[{ name, methods }]`. */
export function publicMethodsOf(fileName, text) {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const out = [];
  const visit = (node) => {
    if ((ts.isClassDeclaration(node) || ts.isClassExpression(node)) && node.name) {
      const names = new Set();
      for (const m of node.members) {
        if (!(ts.isMethodDeclaration(m) || ts.isGetAccessorDeclaration(m) || ts.isSetAccessorDeclaration(m))) continue;
        if (ts.getCombinedModifierFlags(m) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) continue;
        if (m.name && ts.isPrivateIdentifier(m.name)) continue;
        names.add(m.name.getText(sf));
      }
      out.push({ name: node.name.text, methods: [...names] });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** The classes docs/architecture.md allows past the limit: the first column of its table "| class | why |". */
export function allowedClasses(architectureMd) {
  const section = architectureMd.split(/^## /m).find((s) => s.startsWith('Classes past twelve public methods')) ?? '';
  return new Set([...section.matchAll(/^\|\s*`([A-Za-z0-9_]+)`\s*\|/gm)].map((m) => m[1]));
}

/** Every class of the tracked sources under apps/ and libs/ (not *.spec.ts) past the limit and not allowed. */
export function classSizeViolations(root) {
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', 'apps', 'libs'], { cwd: root, encoding: 'utf8' })
    .split('\n').filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts') && !f.endsWith('.d.ts'));
  const allowed = allowedClasses(readFileSync(path.join(root, 'docs/architecture.md'), 'utf8'));
  const found = [];
  for (const file of files) {
    let text;
    try { text = readFileSync(path.join(root, file), 'utf8'); } catch { continue; }
    for (const c of publicMethodsOf(file, text)) {
      if (c.methods.length > MAX_PUBLIC_METHODS && !allowed.has(c.name)) found.push({ file, name: c.name, count: c.methods.length });
    }
  }
  return found;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const found = classSizeViolations(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..'));
  for (const v of found) console.error(`class-size: ${v.file}: ${v.name} has ${v.count} public methods (max ${MAX_PUBLIC_METHODS}; or say why in docs/architecture.md "Classes past twelve public methods")`);
  if (found.length) process.exit(1);
  console.log('class-size: ok');
}
