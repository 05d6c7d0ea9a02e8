import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import type { ApiKeyScope } from '#libs/contracts';
import { generateApiKey, hashSecret } from './api-key.js';
import { isUuid } from './ids.js';
import { OrganizationRepository } from './organization.repository.js';
import type { CreatedApiKey, Organization } from './registry.types.js';

/** Scopes of the key handed out with a new organization. */
export const NEW_ORG_ADMIN_SCOPES: ApiKeyScope[] = ['admin'];

/** Organizations (tenants). */
@Injectable()
export class OrganizationService {
  constructor(private readonly orgs: OrganizationRepository) {}

  /**
   * Create an organization with its first API key (scope `admin`, name `admin`) in one
   * transaction. The key is returned this once. Throws `org.conflict` when the slug is taken.
   */
  async create(slug: string, name: string): Promise<{ organization: Organization; adminKey: CreatedApiKey }> {
    const orgId = randomUUID();
    const material = generateApiKey();
    const keyId = randomUUID();
    const organization = await this.orgs.create({ id: orgId, slug, name }, [
      { id: keyId, orgId, name: 'admin', prefix: material.prefix, secretHash: hashSecret(material.secret), scopes: NEW_ORG_ADMIN_SCOPES },
    ]);
    return {
      organization,
      adminKey: { id: keyId, orgId, name: 'admin', key: material.key, prefix: material.prefix, scopes: [...NEW_ORG_ADMIN_SCOPES], createdAt: organization.createdAt },
    };
  }

  /**
   * Set an organization's storage quota in bytes of messages and artifacts (null: the deployment
   * default ORG_STORAGE_QUOTA_BYTES; 0: unlimited). A platform operation. Throws `org.not_found`.
   */
  async setStorageQuota(orgId: string, bytes: number | null): Promise<void> {
    if (!isUuid(orgId) || !(await this.orgs.setStorageQuota(orgId, bytes))) throw new AppError('org.not_found', `organization ${orgId} not found`);
  }

  /** Throws `org.not_found`. */
  async get(orgId: string): Promise<Organization> {
    const org = await this.orgs.findById(orgId);
    if (!org) throw new AppError('org.not_found', `organization ${orgId} not found`);
    return org;
  }
}
