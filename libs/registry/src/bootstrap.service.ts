import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import type { ApiKeyScope } from '#libs/contracts';
import { AppError } from '#libs/common';
import { hashSecret, parseApiKey, secretMatches } from './api-key.js';
import { ApiKeyRepository } from './api-key.repository.js';
import { OrganizationRepository } from './organization.repository.js';
import type { Organization } from './registry.types.js';

/** Scopes of the BOOTSTRAP_ADMIN_KEY. */
export const BOOTSTRAP_KEY_SCOPES: ApiKeyScope[] = ['platform', 'admin'];

/**
 * At boot, when BOOTSTRAP_ORG_SLUG and BOOTSTRAP_ADMIN_KEY are set: make sure that organization
 * exists and that exact key belongs to it (scopes `platform`, `admin`). Idempotent, and safe
 * when several processes boot at once: a unique violation means another one created the row.
 * An existing key with the same prefix is never overwritten (nor un-revoked); a mismatch is
 * logged.
 */
@Injectable()
export class BootstrapService implements OnApplicationBootstrap {
  private readonly log = new Logger(BootstrapService.name);

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly orgs: OrganizationRepository,
    private readonly keys: ApiKeyRepository,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const slug = this.config.BOOTSTRAP_ORG_SLUG;
    const key = this.config.BOOTSTRAP_ADMIN_KEY;
    if (!slug || !key) return;
    const parsed = parseApiKey(key);
    if (!parsed) throw new Error('BOOTSTRAP_ADMIN_KEY does not have the form aaas_<8 alphanumerics>_<secret>');
    const org = await this.ensureOrg(slug, this.config.BOOTSTRAP_ORG_NAME ?? slug);
    await this.ensureKey(org, parsed.prefix, parsed.secret);
  }

  private async ensureOrg(slug: string, name: string): Promise<Organization> {
    const existing = await this.orgs.findBySlug(slug);
    if (existing) return existing;
    try {
      return await this.orgs.create({ id: randomUUID(), slug, name });
    } catch (e) {
      if (!(e instanceof AppError && e.code === 'org.conflict')) throw e;
      const raced = await this.orgs.findBySlug(slug);
      if (!raced) throw e;
      return raced;
    }
  }

  private async ensureKey(org: Organization, prefix: string, secret: string): Promise<void> {
    let existing = await this.keys.findByPrefix(prefix);
    if (!existing) {
      try {
        await this.keys.insert({ id: randomUUID(), orgId: org.id, name: 'bootstrap', prefix, secretHash: hashSecret(secret), scopes: BOOTSTRAP_KEY_SCOPES });
        this.log.log(`bootstrap admin key ${prefix} created for organization ${org.slug}`);
        return;
      } catch (e) {
        if (!(e instanceof AppError && e.code === 'api_key.prefix_taken')) throw e;
        existing = await this.keys.findByPrefix(prefix);
        if (!existing) throw e;
      }
    }
    if (existing.orgId !== org.id || !secretMatches(secret, existing.secretHash)) {
      this.log.warn(`BOOTSTRAP_ADMIN_KEY: prefix ${prefix} belongs to another key; left unchanged`);
    } else if (existing.revokedAt) {
      this.log.warn(`BOOTSTRAP_ADMIN_KEY: key ${prefix} was revoked; left revoked`);
    }
  }
}
