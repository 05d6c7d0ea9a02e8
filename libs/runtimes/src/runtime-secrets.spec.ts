import { describe, expect, it } from 'vitest';
import { AppError } from '#libs/common';
import { loadConfig, runtimeSecretEnv } from '#libs/config';
import {
  describeSecretRef,
  isLegacySecretEnvName,
  isSecretEnvOwner,
  isSecretRefusal,
  NO_RUNTIME_SECRETS,
  orgSecretEnvNamespaces,
  secretEnvOwner,
  secretRefOf,
} from './runtime-secrets.js';

const ACME = { id: '0190f3c2-a1b2-7c3d-8e9f-0a1b2c3d4e5f', slug: 'acme' };
const ACME_EU = { id: '0190f3c2-a1b2-7c3d-8e9f-000000000002', slug: 'acme-eu' };
const ID = (org: { id: string }) => org.id.replace(/-/g, '').toUpperCase();
const namespaces = (raw: string) => loadConfig({ RUNTIME_SECRET_ENV_NAMESPACES: raw }).RUNTIME_SECRET_ENV_NAMESPACES;

describe('runtime secret env namespaces (issue #43 row 12)', () => {
  it('a variable has one owner read from its name alone: the id form, the one-_ slug form; a longer slug form is nobody\'s', () => {
    expect(secretEnvOwner(`AAAS_RUNTIME_SECRET_${ID(ACME)}_WEBHOOK_KEY`, [])).toEqual({ by: 'id', orgId: ACME.id });
    expect(secretEnvOwner('AAAS_RUNTIME_SECRET_ACME_HOOK', [])).toEqual({ by: 'slug', slug: 'acme' });
    // acme's EU_HOOK or acme-eu's HOOK: ambiguous, so neither's, whichever organizations exist
    expect(secretEnvOwner('AAAS_RUNTIME_SECRET_ACME_EU_HOOK', [])).toBeNull();
    for (const v of ['DATABASE_URL', 'AAAS_RUNTIME_SECRET_', 'AAAS_RUNTIME_SECRET_ACME', 'AAAS_RUNTIME_SECRET_ACME_', `AAAS_RUNTIME_SECRET_${ID(ACME)}_`]) expect(secretEnvOwner(v, []), v).toBeNull();
    // 32 hex digits are an id, never a slug
    expect(secretEnvOwner(`AAAS_RUNTIME_SECRET_${ID(ACME)}_X`, [])?.by).toBe('id');
  });

  it('acme and acme-eu each keep their own namespace: neither reaches the other\'s variables', () => {
    const vars = [`AAAS_RUNTIME_SECRET_${ID(ACME)}_HOOK`, 'AAAS_RUNTIME_SECRET_ACME_HOOK', `AAAS_RUNTIME_SECRET_${ID(ACME_EU)}_HOOK`, 'AAAS_RUNTIME_SECRET_ACME_EU_HOOK'];
    const owners = (org: typeof ACME) => vars.filter((v) => isSecretEnvOwner(secretEnvOwner(v, []), org));
    expect(owners(ACME)).toEqual([`AAAS_RUNTIME_SECRET_${ID(ACME)}_HOOK`, 'AAAS_RUNTIME_SECRET_ACME_HOOK']);
    expect(owners(ACME_EU)).toEqual([`AAAS_RUNTIME_SECRET_${ID(ACME_EU)}_HOOK`]);
    expect(isLegacySecretEnvName('AAAS_RUNTIME_SECRET_ACME_EU_HOOK', ACME)).toBe(true);
    expect(isLegacySecretEnvName('AAAS_RUNTIME_SECRET_ACME_EU_HOOK', ACME_EU)).toBe(true);
    expect(orgSecretEnvNamespaces(ACME, [])).toEqual([`AAAS_RUNTIME_SECRET_${ID(ACME)}_<NAME>`, 'AAAS_RUNTIME_SECRET_ACME_<NAME without _>']);
    expect(orgSecretEnvNamespaces(ACME_EU, [])).toEqual([`AAAS_RUNTIME_SECRET_${ID(ACME_EU)}_<NAME>`]);
  });

  it('an operator mapping keeps an older release\'s names: by slug or by id, the mapped organization only', () => {
    const mapping = namespaces(`acme-eu=ACME_EU, ${ACME.id.toUpperCase()}=ACME_GLOBAL`);
    expect(mapping).toEqual([{ org: 'acme-eu', token: 'ACME_EU' }, { org: ACME.id, token: 'ACME_GLOBAL' }]);
    expect(isSecretEnvOwner(secretEnvOwner('AAAS_RUNTIME_SECRET_ACME_EU_HOOK', mapping), ACME_EU)).toBe(true);
    expect(isSecretEnvOwner(secretEnvOwner('AAAS_RUNTIME_SECRET_ACME_EU_HOOK', mapping), ACME)).toBe(false);
    expect(isSecretEnvOwner(secretEnvOwner('AAAS_RUNTIME_SECRET_ACME_GLOBAL_HOOK_KEY', mapping), ACME)).toBe(true);
    expect(isSecretEnvOwner(secretEnvOwner('AAAS_RUNTIME_SECRET_ACME_HOOK', mapping), ACME)).toBe(true);
    expect(orgSecretEnvNamespaces(ACME_EU, mapping)).toEqual([`AAAS_RUNTIME_SECRET_${ID(ACME_EU)}_<NAME>`, 'AAAS_RUNTIME_SECRET_ACME_EU_<NAME>']);
    // acme=ACME gives acme every ACME_* name (NAME with _ too)
    expect(isSecretEnvOwner(secretEnvOwner('AAAS_RUNTIME_SECRET_ACME_WEBHOOK_KEY', namespaces('acme=ACME')), ACME)).toBe(true);
  });

  it('a mapping under which a variable could have two owners is refused at boot, naming the entry', () => {
    const refused = (raw: string) => {
      try {
        namespaces(raw);
        return '';
      } catch (e) {
        return (e as Error).message;
      }
    };
    expect(refused('acme=ACME,acme-eu=ACME_EU')).toMatch(/AAAS_RUNTIME_SECRET_ACME_EU_… and AAAS_RUNTIME_SECRET_ACME_… \(acme\) overlap/);
    expect(refused('a=A_B,b=A_B')).toMatch(/overlap/);
    expect(refused('acme-eu=ACMEEU')).toMatch(/the one-word token ACMEEU is the namespace of the organization with slug acmeeu/);
    expect(refused(`x=${ID(ACME)}`)).toMatch(/reads as an organization id's namespace/);
    expect(refused('x=a_b')).toMatch(/A-Z, 0-9/);
    expect(refused('x=A__B')).toMatch(/single _/);
    expect(refused('Acme=ACME')).toMatch(/<org slug or id>=<TOKEN>/);
    expect(refused('x=X_1,x=X_2')).toMatch(/x is mapped twice/);
    expect(refused('')).toBe('');
  });

  it('only AAAS_RUNTIME_SECRET_* variables are ever read, whatever the environment holds', () => {
    const env = { DATABASE_URL: 'postgres://secret', AAAS_RUNTIME_SECRET_ACME_HOOK: 'whsec_x', AAAS_RUNTIME_SECRET_: 'bare', AAAS_RUNTIME_SECRET_ACME_EMPTY: '' };
    expect(runtimeSecretEnv('DATABASE_URL', env)).toBeUndefined();
    expect(runtimeSecretEnv('AAAS_RUNTIME_SECRET_ACME_HOOK', env)).toBe('whsec_x');
    expect(runtimeSecretEnv('AAAS_RUNTIME_SECRET_', env)).toBeUndefined();
    expect(runtimeSecretEnv('AAAS_RUNTIME_SECRET_ACME_EMPTY', env)).toBeUndefined();
  });

  it('a config names exactly one source; refusals are told apart from other errors', async () => {
    expect(secretRefOf({ secret: 'hook' })).toEqual({ secret: 'hook' });
    expect(secretRefOf({ secretEnv: 'AAAS_RUNTIME_SECRET_ACME_HOOK' })).toEqual({ secretEnv: 'AAAS_RUNTIME_SECRET_ACME_HOOK' });
    expect(describeSecretRef({ secret: 'hook' })).toBe('runtime secret "hook"');
    expect(describeSecretRef({ secretEnv: 'X' })).toBe('worker variable X');
    const refused = await NO_RUNTIME_SECRETS.resolve('org', { secretEnv: 'DATABASE_URL' }).catch((e: unknown) => e);
    expect(isSecretRefusal(refused)).toBe(true);
    expect(isSecretRefusal(new AppError('service.unavailable', 'down'))).toBe(false);
    expect(isSecretRefusal(new Error('runtime.secret_not_found'))).toBe(false);
  });
});
