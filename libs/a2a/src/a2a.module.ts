import { Module } from '@nestjs/common';
import { PushModule } from '#libs/push';
import { RegistryModule } from '#libs/registry';
import { RunsModule } from '#libs/runs';
import { A2AAccessService } from './a2a-access.service.js';
import { JwtVerifier } from './jwt-verifier.js';
import { A2AJsonRpcHandler } from './a2a-jsonrpc.handler.js';
import { A2AOperations } from './a2a-operations.service.js';
import { A2AStreams } from './a2a-streams.service.js';
import { A2ARestHandler } from './rest/a2a-rest.handler.js';
import { A2APushService } from './push/a2a-push.service.js';
import { PushDeliveryService } from './push/push-delivery.service.js';
import { A2AGrpcBinding } from './grpc/a2a-grpc.binding.js';
import { GrpcEndpoint } from './grpc/grpc-endpoint.js';

/**
 * The A2A adapter: operations over the canonical model, the JSON-RPC, HTTP+JSON and gRPC bindings and
 * access checks.
 * Needs ConfigModule and DbModule (global). Re-exports RegistryModule so the HTTP edge can
 * resolve agents with AgentDirectory.
 */
@Module({
  imports: [RunsModule, RegistryModule, PushModule],
  providers: [A2AOperations, A2AStreams, A2AJsonRpcHandler, A2ARestHandler, A2AGrpcBinding, GrpcEndpoint, A2AAccessService, A2APushService, JwtVerifier],
  exports: [A2AOperations, A2AStreams, A2AJsonRpcHandler, A2ARestHandler, A2AGrpcBinding, GrpcEndpoint, A2AAccessService, A2APushService, RegistryModule, PushModule],
})
export class A2AModule {}

/**
 * Push notification delivery (workers): follows runs with push configs and POSTs their events
 * (see PushDeliveryService). Needs ConfigModule, DbModule and MetricsModule (global).
 */
@Module({
  imports: [RunsModule, PushModule],
  providers: [PushDeliveryService],
  exports: [PushDeliveryService],
})
export class PushDeliveryModule {}
