import { ExtensionDocsController } from './extension-docs.controller.js';
import { RegistryController } from './registry.controller.js';
import { Module } from '@nestjs/common';
import { A2AModule } from '#libs/a2a';
import { A2AJsonRpcRoute } from './a2a-jsonrpc.route.js';
import { A2ARestContentTypeGuard } from './a2a-rest-content-type.js';
import { A2ARestRoutes } from './a2a-rest.routes.js';
import { AgentCardController } from './agent-card.controller.js';
import { SseHeartbeat } from '../common/sse.js';
import { ReadYourWrites } from '../common/read-your-writes.js';
import { A2AAdmission } from './a2a-admission.js';
import { AgentCardSigner } from './agent-card.signer.js';

/**
 * A2A endpoints: JSON-RPC (v1.0 + v0.3) at each agent's binding path `/a2a/:org/:agent`, the
 * HTTP+JSON binding (v1.0) under the same path (`/a2a/:org/:agent/message:send`, `/tasks...`), its
 * Agent Card at `/a2a/:org/:agent/.well-known/agent-card.json`, and the default agent's card at
 * `/.well-known/agent-card.json`. Nothing here collides with the admin API (`/v1/...`) or `/docs`.
 */
@Module({
  imports: [A2AModule],
  controllers: [AgentCardController, RegistryController, ExtensionDocsController],
  providers: [A2AJsonRpcRoute, A2ARestRoutes, A2AAdmission, SseHeartbeat, ReadYourWrites, A2ARestContentTypeGuard, AgentCardSigner],
  // the gRPC edge (apps/api/src/grpc) admits callers and takes stream slots the same way
  exports: [A2AAdmission, SseHeartbeat, ReadYourWrites],
})
export class A2AHttpModule {}
