import { type CallHandler, type ExecutionContext, Injectable, type NestInterceptor } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { type Observable, tap } from 'rxjs';
import { AgentDirectory } from '#libs/registry';

/**
 * On the admin controllers that change what an agent resolves to (agents, revisions, bindings):
 * after every successful write (any method but GET/HEAD), clears this process's agent
 * resolution cache, so A2A calls through this instance see the change at once.
 */
@Injectable()
export class RegistryCacheInterceptor implements NestInterceptor {
  constructor(private readonly directory: AgentDirectory) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const req = context.switchToHttp().getRequest<FastifyRequest>();
    const write = req.method !== 'GET' && req.method !== 'HEAD';
    return write ? next.handle().pipe(tap(() => this.directory.invalidate())) : next.handle();
  }
}
