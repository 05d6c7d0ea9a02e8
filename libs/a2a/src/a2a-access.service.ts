import { Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import type { CredentialSecurity, JwtSecurity } from '#libs/contracts';
import { API_KEY_PATTERN, ApiKeyService, canInvokeA2A, hasScope, type Principal, type ResolvedA2AAgent } from '#libs/registry';
import { ANONYMOUS_CALLER, type A2ACaller } from './a2a.types.js';
import { JwtVerifier } from './jwt-verifier.js';
import { A2AError } from './a2a.errors.js';
import { API_KEY_HEADER } from './agent-card.projection.js';

/**
 * Who may call an agent's A2A binding (BindingSecurity). `none`: anyone (a valid key of the
 * organization, when presented, identifies the caller). `jwt`: a bearer JWT of the configured
 * issuer and audience (JwtVerifier). `apiKey`: an API key of
 * the agent's organization holding `a2a:invoke` or `admin`. `anyOf`: a credential of any one of
 * its alternatives (the card's `securityRequirements` list them, one per alternative): an
 * `X-API-Key`, or a bearer token shaped like an API key, is checked as a key; another bearer token
 * as a JWT; nothing presented is Unauthenticated. Failures follow A2A v1.0 §3.3.2:
 * - no key, an unknown/revoked key, or a key of another organization → Unauthenticated
 *   (the edge answers HTTP 401 with a challenge; another org's key is simply not a credential
 *   for this agent, and saying more would reveal what the key can reach);
 * - a key of the organization without an invoking scope → Unauthorized (HTTP 403), naming the
 *   missing scope.
 */
@Injectable()
export class A2AAccessService {
  constructor(
    private readonly apiKeys: ApiKeyService,
    private readonly jwt: JwtVerifier,
  ) {}

  /**
   * Who calls `agent`, by the credentials the binding's security declares (see `authorize`): the
   * A2A caller that owns the tasks it creates. `presented.apiKey`: X-API-Key or a bearer token
   * read as a key; `presented.bearer`: the Authorization bearer token (a JWT on a `jwt` binding).
   * `required`: a credential is needed even on an open (`none`) binding, where it must be an API
   * key of the organization (the authenticated extended card, A2A v1.0 §3.1.11).
   */
  async caller(agent: ResolvedA2AAgent, presented: { apiKey?: string; bearer?: string }, opts: { required?: boolean } = {}): Promise<A2ACaller> {
    const sec = agent.binding.security;
    if (sec.scheme === 'jwt') return this.jwtCaller(sec, presented.bearer);
    if (sec.scheme === 'anyOf') return this.anyOfCaller(agent, sec.anyOf, presented);
    const principal = await this.authorize(agent, presented.apiKey, opts);
    return principal ? keyCaller(principal) : ANONYMOUS_CALLER;
  }

  private async jwtCaller(sec: JwtSecurity, bearer: string | undefined): Promise<A2ACaller> {
    const c = await this.jwt.verify(bearer, sec);
    return { id: `jwt:${c.issuer}|${c.subject}`, allTasks: c.scopes.includes('a2a:all-tasks') };
  }

  /** Alternatives: the credential presented picks the one it is checked against (never both). */
  private async anyOfCaller(agent: ResolvedA2AAgent, alternatives: CredentialSecurity[], presented: { apiKey?: string; bearer?: string }): Promise<A2ACaller> {
    const jwt = alternatives.find((a): a is JwtSecurity => a.scheme === 'jwt');
    const acceptsKey = alternatives.some((a) => a.scheme === 'apiKey');
    const headerKey = presented.apiKey !== undefined && presented.apiKey !== presented.bearer;
    const bearerIsKey = presented.bearer !== undefined && API_KEY_PATTERN.test(presented.bearer);
    if (acceptsKey && (headerKey || bearerIsKey || !jwt)) return keyCaller(await this.authorizeKey(agent, presented.apiKey));
    if (jwt && presented.bearer !== undefined) return this.jwtCaller(jwt, presented.bearer);
    throw new A2AError('Unauthenticated', `this agent requires ${alternatives.map((a) => (a.scheme === 'jwt' ? 'a JWT bearer token' : `an API key in header ${API_KEY_HEADER} or Authorization: Bearer`)).join(' or ')}`);
  }

  /**
   * `required`: demand a valid key of the organization even when the binding is open (the
   * authenticated extended card, §3.1.11). Returns the caller's principal (null on an open
   * binding: callers are anonymous there).
   */
  async authorize(agent: ResolvedA2AAgent, presentedKey: string | undefined, opts: { required?: boolean } = {}): Promise<Principal | null> {
    if (agent.binding.security.scheme === 'none' && !opts.required) {
      // no credential needed; one presented identifies its caller (the owner of the tasks it
      // creates, and `admin` / `a2a:all-tasks` see every task), anything else stays anonymous
      if (!presentedKey) return null;
      const principal = await this.apiKeys.authenticate(presentedKey).catch(() => null);
      return principal && canInvokeA2A(principal, agent.org.id) ? principal : null;
    }
    return this.authorizeKey(agent, presentedKey);
  }

  /** A valid key of the agent's organization that may invoke it. Throws Unauthenticated / Unauthorized. */
  private async authorizeKey(agent: ResolvedA2AAgent, presentedKey: string | undefined): Promise<Principal> {
    if (!presentedKey) {
      throw new A2AError('Unauthenticated', `this agent requires an API key in header ${API_KEY_HEADER} or Authorization: Bearer`);
    }
    let principal: Principal;
    try {
      principal = await this.apiKeys.authenticate(presentedKey);
    } catch (e) {
      if (e instanceof AppError && e.code.startsWith('auth.')) throw new A2AError('Unauthenticated', 'the API key is not valid for this agent', { cause: e });
      throw e;
    }
    if (principal.orgId !== agent.org.id) throw new A2AError('Unauthenticated', 'the API key is not valid for this agent');
    if (!canInvokeA2A(principal, agent.org.id)) {
      throw new A2AError('Unauthorized', 'the API key lacks scope a2a:invoke', { metadata: { requiredScope: 'a2a:invoke' } });
    }
    return principal;
  }
}

function keyCaller(principal: Principal): A2ACaller {
  return { id: `key:${principal.keyId}`, allTasks: hasScope(principal, 'admin') || hasScope(principal, 'a2a:all-tasks') };
}
