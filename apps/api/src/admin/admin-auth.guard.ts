import { type CanActivate, createParamDecorator, type ExecutionContext, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '#libs/common';
import type { ApiKeyScope } from '#libs/contracts';
import { ApiKeyService, hasScope, type Principal } from '#libs/registry';

const REQUIRED_SCOPE = 'admin:required-scope';
const PRINCIPAL = Symbol('admin.principal');

type WithPrincipal = FastifyRequest & { [PRINCIPAL]?: Principal };

/** Scope a route (or every route of a controller) needs; `admin` when not given. */
export const RequireScope = (scope: ApiKeyScope) => SetMetadata(REQUIRED_SCOPE, scope);

/** The authenticated caller of an admin route (set by AdminAuthGuard). */
export const CurrentPrincipal = createParamDecorator((_: unknown, ctx: ExecutionContext): Principal => principalOf(ctx.switchToHttp().getRequest()));

/** The principal AdminAuthGuard attached to the request. */
export function principalOf(req: FastifyRequest): Principal {
  const principal = (req as WithPrincipal)[PRINCIPAL];
  if (!principal) throw new AppError('internal', 'admin route without AdminAuthGuard');
  return principal;
}

/** The API key presented as `Authorization: Bearer <key>` or `X-API-Key: <key>`, if any. */
export function presentedApiKey(headers: FastifyRequest['headers']): string | null {
  const auth = headers.authorization;
  if (typeof auth === 'string') {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (m) return m[1]!;
  }
  const header = headers['x-api-key'];
  return typeof header === 'string' && header.trim().length > 0 ? header.trim() : null;
}

/**
 * Authenticates admin routes with an API key and checks the route's scope.
 * 401 `auth.missing_credentials` (no key), 401 `auth.invalid_credentials` (unknown, revoked),
 * 403 `auth.forbidden` (scope missing). Tenancy is enforced by the services: every query is
 * scoped by the principal's org, so another org's resources are 404s.
 */
@Injectable()
export class AdminAuthGuard implements CanActivate {
  constructor(
    private readonly keys: ApiKeyService,
    private readonly reflector: Reflector,
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const req = ctx.switchToHttp().getRequest<WithPrincipal>();
    const reply = ctx.switchToHttp().getResponse<FastifyReply>();
    const key = presentedApiKey(req.headers);
    if (!key) {
      reply.header('www-authenticate', 'Bearer');
      throw new AppError('auth.missing_credentials', 'an API key is required (Authorization: Bearer <key> or X-API-Key)');
    }
    let principal: Principal;
    try {
      principal = await this.keys.authenticate(key);
    } catch (e) {
      if (e instanceof AppError && e.code === 'auth.invalid_credentials') reply.header('www-authenticate', 'Bearer error="invalid_token"');
      throw e;
    }
    const scope = this.reflector.getAllAndOverride<ApiKeyScope | undefined>(REQUIRED_SCOPE, [ctx.getHandler(), ctx.getClass()]) ?? 'admin';
    if (!hasScope(principal, scope)) {
      throw new AppError('auth.forbidden', `this API key lacks the '${scope}' scope`, { details: { required: scope } });
    }
    req[PRINCIPAL] = principal;
    return true;
  }
}
