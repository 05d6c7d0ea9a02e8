import type {
  A2AExtension,
  A2AProfile,
  A2ATransport,
  ApiKeyScope,
  BindingSecurity,
  ProtocolProfiles,
  RevisionStatus,
} from '#libs/contracts';

/**
 * Who is calling: the organization and key an API key authenticated as. Every registry query
 * made on a caller's behalf is scoped by `orgId`.
 */
export interface Principal {
  orgId: string;
  keyId: string;
  scopes: ApiKeyScope[];
}

export interface Organization {
  id: string;
  slug: string;
  name: string;
  createdAt: Date;
}

/** An API key as stored, minus its secret hash. */
export interface ApiKeyInfo {
  id: string;
  orgId: string;
  name: string;
  /** The 8-character clear part of the key (`aaas_<prefix>_<secret>`), unique. */
  prefix: string;
  scopes: ApiKeyScope[];
  createdAt: Date;
  revokedAt: Date | null;
  /**
   * When the key last authenticated a request; null until it has. Recorded after the request and
   * at most once per LAST_USED_RECORD_INTERVAL_MS per key and process, so it may lag the real last
   * use by up to that interval (see ApiKeyService.authenticate).
   */
  lastUsedAt: Date | null;
}

/** A key just created: `key` is the whole secret, returned this once and never stored. */
export interface CreatedApiKey {
  id: string;
  orgId: string;
  name: string;
  key: string;
  prefix: string;
  scopes: ApiKeyScope[];
  createdAt: Date;
}

/** A2A AgentProvider. */
export interface AgentProvider {
  organization: string;
  url: string;
}

export interface Agent {
  id: string;
  orgId: string;
  slug: string;
  name: string;
  description: string;
  provider: AgentProvider | null;
  documentationUrl: string | null;
  iconUrl: string | null;
  /** Served at the host root's /.well-known/agent-card.json; at most one per deployment. */
  isDefault: boolean;
  activeRevisionId: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface Revision {
  id: string;
  orgId: string;
  agentId: string;
  /** 1, 2, ... per agent, in creation order. */
  number: number;
  status: RevisionStatus;
  protocolProfiles: ProtocolProfiles;
  /** Runtime config `{ kind, ... }` as validated by its runtime. */
  runtime: unknown;
  createdAt: Date;
  publishedAt: Date | null;
  retiredAt: Date | null;
}

/** The agent's A2A protocol binding (one per agent). */
export interface A2ABinding {
  id: string;
  orgId: string;
  agentId: string;
  protocol: 'a2a';
  enabled: boolean;
  transports: A2ATransport[];
  /** `/a2a/<orgSlug>/<agentSlug>`, computed, unique per deployment. */
  path: string;
  security: BindingSecurity;
  extensions: A2AExtension[];
  createdAt: Date;
  updatedAt: Date;
}

/**
 * Everything the A2A adapter needs to serve one agent: identity, the active published
 * revision's A2A profile and runtime config, and its enabled A2A binding.
 */
export interface ResolvedA2AAgent {
  org: { id: string; slug: string; name: string };
  agent: {
    id: string;
    slug: string;
    name: string;
    description: string;
    provider: AgentProvider | null;
    documentationUrl: string | null;
    iconUrl: string | null;
    isDefault: boolean;
  };
  revision: {
    id: string;
    number: number;
    /** `protocolProfiles.a2a`, parsed with A2AProfileSchema (defaults applied). */
    a2a: A2AProfile;
    /** Runtime config `{ kind, ... }`; the worker parses it with the runtime registry. */
    runtime: unknown;
    publishedAt: Date;
  };
  binding: {
    id: string;
    transports: A2ATransport[];
    path: string;
    security: BindingSecurity;
    extensions: A2AExtension[];
  };
  /** Newest change of what the card is projected from: agent, active revision, binding. */
  modifiedAt: Date;
}
