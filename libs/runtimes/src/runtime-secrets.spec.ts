import { describe, expect, it } from 'vitest';
import { AppError } from '#libs/common';
import { runtimeSecretEnv } from '#libs/config';
import { describeSecretRef, isSecretRefusal, NO_RUNTIME_SECRETS, orgSecretEnvPrefix, secretRefOf } from './runtime-secrets.js';

describe('runtime secret references', () => {
  it('an org namespace is its slug upper-cased, every character outside A-Z0-9 as _', () => {
    expect(orgSecretEnvPrefix('acme')).toBe('AAAS_RUNTIME_SECRET_ACME_');
    expect(orgSecretEnvPrefix('acme-eu-2')).toBe('AAAS_RUNTIME_SECRET_ACME_EU_2_');
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
