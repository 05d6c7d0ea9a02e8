/**
 * Summarises a V8 `.cpuprofile` (from `node --cpu-prof`, e.g. BENCH_PROFILE_DIR=… for the API
 * child): self time by function and by package / source area, and inclusive time of our own
 * functions, so "where does the time go" is one command:
 *
 *   node dist/bench/lib/cpuprofile-top.js <file.cpuprofile> [top=25]
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** `node_modules/<pkg>` (scoped too), `dist/<area>/…` for our code, `node:` internals, or the label. */
export function area(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith('node:')) return url;
  const dist = url.indexOf('/dist/');
  if (dist >= 0) return url.slice(dist + 1).split('/').slice(0, 4).join('/');
  return path.basename(url);
}

export function summarise(file: string, top = 25): string {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const selfUs = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) selfUs.set(p.samples[i]!, (selfUs.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0));
  const total = [...selfUs.values()].reduce((a, b) => a + b, 0);

  const fnSelf = new Map<string, number>();
  const areaSelf = new Map<string, number>();
  const ourInclusive = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const n = byId.get(id)!;
    const { functionName, url, lineNumber } = n.callFrame;
    const key = `${functionName || '(anonymous)'} ${url ? `${area(url, functionName)}:${lineNumber + 1}` : ''}`.trim();
    fnSelf.set(key, (fnSelf.get(key) ?? 0) + us);
    const a = area(url, functionName);
    areaSelf.set(a, (areaSelf.get(a) ?? 0) + us);
    // inclusive time of our compiled functions (dist/apps, dist/libs): each once per stack
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)!.callFrame;
      if (!f.url.includes('/dist/') || f.url.includes('node_modules')) continue;
      const k = `${f.functionName || '(anonymous)'} ${area(f.url, f.functionName)}:${f.lineNumber + 1}`;
      if (seen.has(k)) continue;
      seen.add(k);
      ourInclusive.set(k, (ourInclusive.get(k) ?? 0) + us);
    }
  }
  const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)}%`;
  const list = (m: Map<string, number>, n: number) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, us]) => `  ${pct(us)}  ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}`)
      .join('\n');
  return [
    `${file}: ${(total / 1000).toFixed(0)} ms sampled over ${((p.endTime - p.startTime) / 1000).toFixed(0)} ms`,
    'self time by area:',
    list(areaSelf, top),
    'self time by function:',
    list(fnSelf, top),
    'inclusive time of our functions (dist/):',
    list(ourInclusive, top),
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const [file, top] = process.argv.slice(2);
  if (!file) {
    console.error('usage: node dist/bench/lib/cpuprofile-top.js <file.cpuprofile> [top]');
    process.exit(2);
  }
  console.log(summarise(file, top ? Number(top) : 25));
}
