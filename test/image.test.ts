import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/** The production image (checked offline: no Docker engine here): lean, non-root, signal-safe, probed. */
describe('Dockerfile and .dockerignore', () => {
  const dockerfile = readFileSync('Dockerfile', 'utf8');
  const ignore = readFileSync('.dockerignore', 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const stages = dockerfile.split(/^FROM /m).slice(1);
  const runtime = stages.at(-1)!;

  it('never sends the host node_modules, builds, .env files or VCS data as build context', () => {
    for (const entry of ['node_modules', 'dist', '.env', '.env.*', '.git']) expect(ignore, entry).toContain(entry);
  });

  it('builds in one stage and runs from another that copies only what runs', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(runtime).not.toMatch(/^COPY \. /m);
    for (const line of runtime.split('\n').filter((l) => l.startsWith('COPY'))) expect(line).toMatch(/--from=build/);
  });

  it('runs as a non-root user, with tini as PID 1 and a readiness healthcheck', () => {
    expect(runtime).toMatch(/^USER node$/m);
    expect(runtime).toMatch(/ENTRYPOINT \["\/usr\/bin\/tini", "--"\]/);
    expect(runtime).toMatch(/HEALTHCHECK[\s\S]*\/readyz/);
  });

  it('migrations are their own job in compose, not every replica start', () => {
    const compose = readFileSync('docker-compose.yml', 'utf8');
    expect(compose).toMatch(/migrate:\s*\n\s*build: \.\s*\n\s*command: \["node", "scripts\/migrate\.mjs"\]/);
    expect(compose).toMatch(/api:[\s\S]*command: \["node", "dist\/apps\/api\/src\/main\.js"\]/);
    expect(compose).toMatch(/service_completed_successfully/);
  });
});
