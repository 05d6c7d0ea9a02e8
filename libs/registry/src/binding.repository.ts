import { Injectable } from '@nestjs/common';
import type { A2AExtension, A2ATransport, BindingSecurity } from '#libs/contracts';
import { AppError } from '#libs/common';
import { DatabaseService, Prisma, translated } from '#libs/db';
import type { A2ABinding } from './registry.types.js';

export interface A2ABindingFields {
  enabled: boolean;
  transports: A2ATransport[];
  security: BindingSecurity;
  extensions: A2AExtension[];
}

interface BindingRow {
  id: string;
  orgId: string;
  agentId: string;
  protocol: string;
  enabled: boolean;
  transports: string[];
  path: string;
  security: unknown;
  extensions: unknown;
  createdAt: Date;
  updatedAt: Date;
}

const toBinding = (row: BindingRow): A2ABinding => ({
  id: row.id,
  orgId: row.orgId,
  agentId: row.agentId,
  protocol: 'a2a',
  enabled: row.enabled,
  transports: row.transports as A2ATransport[],
  path: row.path,
  security: row.security as BindingSecurity,
  extensions: (row.extensions ?? []) as A2AExtension[],
  createdAt: row.createdAt,
  updatedAt: row.updatedAt,
});

const json = (v: unknown) => v as Prisma.InputJsonValue;

/** Data access for `protocol_bindings` (protocol `a2a`), scoped by org and agent. */
@Injectable()
export class BindingRepository {
  constructor(private readonly db: DatabaseService) {}

  async findA2A(orgId: string, agentId: string): Promise<A2ABinding | null> {
    const row = await this.db.prisma.protocolBinding.findFirst({ where: { orgId, agentId, protocol: 'a2a' } });
    return row ? toBinding(row) : null;
  }

  /** Errors: `binding.conflict` when the agent has an A2A binding (or the path is taken). */
  async insertA2A(row: { id: string; orgId: string; agentId: string; path: string } & A2ABindingFields): Promise<A2ABinding> {
    const created = await translated(
      this.db.prisma.protocolBinding.create({ data: { ...row, protocol: 'a2a', security: json(row.security), extensions: json(row.extensions) } }),
      { unique: () => new AppError('binding.conflict', `the agent already has an A2A binding, or its path ${row.path} is taken`, { details: { agentId: row.agentId, protocol: 'a2a' } }) },
    );
    return toBinding(created);
  }

  /** Null when the agent has no A2A binding. `path` is recomputed by the caller when given. */
  async updateA2A(orgId: string, agentId: string, patch: Partial<A2ABindingFields> & { path?: string }): Promise<A2ABinding | null> {
    const data: Prisma.ProtocolBindingUpdateManyMutationInput = {};
    if (patch.enabled !== undefined) data.enabled = patch.enabled;
    if (patch.transports !== undefined) data.transports = patch.transports;
    if (patch.security !== undefined) data.security = json(patch.security);
    if (patch.extensions !== undefined) data.extensions = json(patch.extensions);
    if (patch.path !== undefined) data.path = patch.path;
    const res = await translated(this.db.prisma.protocolBinding.updateMany({ where: { orgId, agentId, protocol: 'a2a' }, data }), {
      unique: () => new AppError('binding.conflict', `the path ${patch.path ?? ''} is taken`, { details: { agentId, protocol: 'a2a' } }),
    });
    return res.count === 0 ? null : this.findA2A(orgId, agentId);
  }
}
