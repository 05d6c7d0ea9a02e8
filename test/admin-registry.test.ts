import { randomUUID } from 'node:crypto';
import type { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigModule } from '#libs/config';
import { DatabaseService, DbModule } from '#libs/db';
import { ApiKeyService, OrganizationService, RegistryModule } from '#libs/registry';
import { RuntimesModule } from '#libs/runtimes';
import { testEnv } from './support/env.js';

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const alnum = (n: number) => Array.from({ length: n }, () => ALNUM[Math.floor(Math.random() * 62)]).join('');

/** A registry-only Nest context, as another process would boot it. */
async function boot(env: Record<string, string> = {}) {
  const mod = await Test.createTestingModule({ imports: [ConfigModule.forRoot({ ...testEnv(), ...env }), DbModule, RuntimesModule.forRoot(), RegistryModule] }).compile();
  return mod;
}

describe('registry: bootstrap and API keys (real Postgres)', () => {
  let ctx: INestApplicationContext;
  let db: DatabaseService;

  beforeAll(async () => {
    ctx = await (await boot()).init();
    db = ctx.get(DatabaseService);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('two processes booting with the same BOOTSTRAP_* settings create the org and key exactly once', async () => {
    const slug = `boot-${randomUUID().slice(0, 8)}`;
    const prefix = alnum(8);
    const key = `aaas_${prefix}_${alnum(32)}`;
    const env = { BOOTSTRAP_ORG_SLUG: slug, BOOTSTRAP_ORG_NAME: 'Boot Co', BOOTSTRAP_ADMIN_KEY: key };
    const modules = await Promise.all(Array.from({ length: 4 }, () => boot(env)));
    const contexts = await Promise.all(modules.map((m) => m.init()));
    try {
      const orgs = await db.query<{ id: string; name: string }>('SELECT id, name FROM organizations WHERE slug = $1', [slug]);
      expect(orgs).toHaveLength(1);
      expect(orgs[0]!.name).toBe('Boot Co');
      const keys = await db.query<{ org_id: string; scopes: string[] }>('SELECT org_id, scopes FROM api_keys WHERE prefix = $1', [prefix]);
      expect(keys).toEqual([{ org_id: orgs[0]!.id, scopes: ['platform', 'admin'] }]);
      const principal = await ctx.get(ApiKeyService).authenticate(key);
      expect(principal).toMatchObject({ orgId: orgs[0]!.id, scopes: ['platform', 'admin'] });

      // booting again later changes nothing
      const later = await (await boot(env)).init();
      await later.close();
      expect(await db.query('SELECT 1 FROM api_keys WHERE prefix = $1', [prefix])).toHaveLength(1);
    } finally {
      await Promise.all(contexts.map((c) => c.close()));
    }
  });

  it('caches successful authentications; a revocation through the service applies at once in this process', async () => {
    const keys = ctx.get(ApiKeyService);
    const { organization } = await ctx.get(OrganizationService).create(`cache-${randomUUID().slice(0, 8)}`, 'Cache');
    const created = await keys.create(organization.id, 'hot', ['a2a:invoke']);
    expect(await keys.authenticate(created.key)).toEqual({ orgId: organization.id, keyId: created.id, scopes: ['a2a:invoke'] });

    // revoked behind the service's back (as by another process): the cache answers within its TTL
    await db.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [created.id]);
    expect((await keys.authenticate(created.key)).keyId).toBe(created.id);

    // revoked through the service: evicted from the cache
    await keys.revoke(organization.id, created.id);
    await expect(keys.authenticate(created.key)).rejects.toMatchObject({ code: 'auth.invalid_credentials' });

    // a key of the right shape with a wrong secret never authenticates, even after a success
    const other = await keys.create(organization.id, 'other', ['admin']);
    await keys.authenticate(other.key);
    const wrong = `${other.key.slice(0, -1)}${other.key.endsWith('x') ? 'y' : 'x'}`;
    await expect(keys.authenticate(wrong)).rejects.toMatchObject({ code: 'auth.invalid_credentials' });
  });
});
