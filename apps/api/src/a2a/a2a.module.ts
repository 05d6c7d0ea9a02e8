import { Module } from '@nestjs/common';
import { A2AModule } from '#libs/a2a';
import { A2AJsonRpcController } from './a2a-jsonrpc.controller.js';
import { AgentCardController } from './agent-card.controller.js';

/**
 * A2A endpoints: JSON-RPC (v1.0 + v0.3) at each agent's binding path `/a2a/:org/:agent`, its
 * Agent Card at `/a2a/:org/:agent/.well-known/agent-card.json`, and the default agent's card at
 * `/.well-known/agent-card.json`. Nothing here collides with the admin API (`/v1/...`) or `/docs`.
 */
@Module({
  imports: [A2AModule],
  controllers: [A2AJsonRpcController, AgentCardController],
})
export class A2AHttpModule {}
