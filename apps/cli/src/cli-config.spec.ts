import { mkdtemp, readFile, stat, chmod, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configPath, loadConfig, resolveTarget, saveConfig, type CliConfig } from './cli-config.js';

const config: CliConfig = { current: 'dev', contexts: { dev: { url: 'http://dev:3000', key: 'aaas_dev' }, prod: { url: 'https://prod.example', key: 'aaas_prod' } } };

describe('resolveTarget: flags > environment > context', () => {
  it('the current context when nothing else is given', () => {
    expect(resolveTarget({}, {}, config)).toMatchObject({ url: 'http://dev:3000', key: 'aaas_dev', context: { name: 'dev' } });
  });
  it('--context, else AAAS_CONTEXT, picks another; an unknown one is an error', () => {
    expect(resolveTarget({ contextName: 'prod' }, { AAAS_CONTEXT: 'dev' }, config)).toMatchObject({ url: 'https://prod.example', key: 'aaas_prod' });
    expect(resolveTarget({}, { AAAS_CONTEXT: 'prod' }, config)).toMatchObject({ key: 'aaas_prod' });
    expect(() => resolveTarget({ contextName: 'nope' }, {}, config)).toThrow('no context "nope"');
  });
  it('flags win over the environment, which wins over the context', () => {
    expect(resolveTarget({ url: 'http://x', key: 'k1' }, { AAAS_URL: 'http://y', AAAS_API_KEY: 'k2' }, config)).toMatchObject({ url: 'http://x', key: 'k1' });
    expect(resolveTarget({}, { AAAS_URL: 'http://dev:3000/', AAAS_API_KEY: 'k2' }, config)).toMatchObject({ url: 'http://dev:3000/', key: 'k2' });
  });
  it("never sends a context's key to another URL", () => {
    expect(resolveTarget({ url: 'http://evil.example' }, {}, config)).toMatchObject({ url: 'http://evil.example', key: undefined, context: null });
    expect(resolveTarget({}, { AAAS_URL: 'http://evil.example' }, config).key).toBeUndefined();
    expect(resolveTarget({ url: 'http://dev:3000/' }, {}, config).key).toBe('aaas_dev');
  });
  it('no context and nothing given: the default URL, no key', () => {
    expect(resolveTarget({}, {}, { current: null, contexts: {} })).toEqual({ url: 'http://localhost:3000', key: undefined, context: null });
  });
});

describe('config file', () => {
  it('lives under XDG_CONFIG_HOME (absolute), else ~/.config', () => {
    expect(configPath({ XDG_CONFIG_HOME: '/x/cfg' })).toBe('/x/cfg/aaas/config.json');
    expect(configPath({ XDG_CONFIG_HOME: 'relative' })).toMatch(/\.config\/aaas\/config\.json$/);
  });
  it('is saved 0600 in a 0700 directory, also over wider modes, and read back', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'aaas-cfg-'));
    const file = path.join(dir, 'aaas', 'config.json');
    await mkdir(path.dirname(file), { mode: 0o755 });
    await writeFile(file, '{}', { mode: 0o644 });
    await chmod(file, 0o644);
    saveConfig(config, file);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(path.dirname(file))).mode & 0o777).toBe(0o700);
    expect(loadConfig(file)).toEqual(config);
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual(config);
  });
  it('missing: empty; not JSON or not a config: a clear error', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'aaas-cfg-'));
    expect(loadConfig(path.join(dir, 'none.json'))).toEqual({ current: null, contexts: {} });
    await writeFile(path.join(dir, 'bad.json'), '{oops');
    expect(() => loadConfig(path.join(dir, 'bad.json'))).toThrow('is not valid JSON');
    await writeFile(path.join(dir, 'odd.json'), '{"contexts":{"a":{"url":1}}}');
    expect(() => loadConfig(path.join(dir, 'odd.json'))).toThrow('context "a" needs url and key');
  });
});
