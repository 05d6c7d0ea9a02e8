import { Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import { DatabaseService, translated } from '#libs/db';
import type { Organization } from './registry.types.js';

/** A key row to insert with an organization (see ApiKeyRepository for the columns). */
export interface NewApiKeyRow {
  id: string;
  orgId: string;
  name: string;
  prefix: string;
  secretHash: string;
  scopes: string[];
}

const toOrganization = (row: { id: string; slug: string; name: string; createdAt: Date }): Organization => ({
  id: row.id,
  slug: row.slug,
  name: row.name,
  createdAt: row.createdAt,
});

/** Data access for `organizations`. Unique violations (slug) surface as the driver's error. */
@Injectable()
export class OrganizationRepository {
  constructor(private readonly db: DatabaseService) {}

  /** Insert an organization and, in the same transaction, its first API keys. Errors: `org.conflict` (slug taken). */
  async create(org: { id: string; slug: string; name: string }, keys: NewApiKeyRow[] = []): Promise<Organization> {
    const [row] = await translated(
      this.db.prisma.$transaction([this.db.prisma.organization.create({ data: org }), ...keys.map((k) => this.db.prisma.apiKey.create({ data: k }))]),
      { unique: () => new AppError('org.conflict', `an organization with slug '${org.slug}' exists`, { details: { slug: org.slug } }) },
    );
    return toOrganization(row as Organization);
  }

  async findById(id: string): Promise<Organization | null> {
    const row = await this.db.prisma.organization.findUnique({ where: { id } });
    return row ? toOrganization(row) : null;
  }

  /**
   * Set the organization's storage quota (bytes; null = the deployment default, 0 = unlimited).
   * False when no such organization.
   */
  async setStorageQuota(id: string, bytes: number | null): Promise<boolean> {
    const rows = await this.db.query<{ id: string }>(`UPDATE organizations SET storage_quota_bytes = $2 WHERE id = $1 RETURNING id`, [id, bytes]);
    return rows.length > 0;
  }

  async findBySlug(slug: string): Promise<Organization | null> {
    const row = await this.db.prisma.organization.findUnique({ where: { slug } });
    return row ? toOrganization(row) : null;
  }
}
