import { Module } from '@nestjs/common';
import { RegistryModule } from '#libs/registry';
import { RunsModule } from '#libs/runs';
import { A2AAccessService } from './a2a-access.service.js';
import { A2AJsonRpcHandler } from './a2a-jsonrpc.handler.js';
import { A2AOperations } from './a2a-operations.service.js';
import { A2AStreams } from './a2a-streams.service.js';
import { A2ARestHandler } from './rest/a2a-rest.handler.js';

/**
 * The A2A adapter: operations over the canonical model, the JSON-RPC and HTTP+JSON bindings and
 * access checks.
 * Needs ConfigModule and DbModule (global). Re-exports RegistryModule so the HTTP edge can
 * resolve agents with AgentDirectory.
 */
@Module({
  imports: [RunsModule, RegistryModule],
  providers: [A2AOperations, A2AStreams, A2AJsonRpcHandler, A2ARestHandler, A2AAccessService],
  exports: [A2AOperations, A2AStreams, A2AJsonRpcHandler, A2ARestHandler, A2AAccessService, RegistryModule],
})
export class A2AModule {}
