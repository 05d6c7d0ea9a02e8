/**
 * The A2A adapter (A2A v1.0, plus v0.3 JSON-RPC for header-less callers): a view over the
 * canonical model. Pure mappings (v1.0 / v0.3 wire ↔ canonical), the Agent Card projection, the
 * operations service, the framework-free JSON-RPC and HTTP+JSON bindings and the access check. No HTTP framework
 * types: apps/api/src/a2a is the edge.
 */
export * from './a2a.types.js';
export * from './a2a.errors.js';
export * from './agent-card.projection.js';
export * from './a2a-operations.service.js';
export * from './a2a-jsonrpc.handler.js';
export * from './a2a-streams.service.js';
export * from './stream-projection.js';
export * from './a2a-access.service.js';
export * from './a2a.module.js';
export * from './list-tasks.js';
export * from './task-state.js';
export * from './rest/a2a-rest.handler.js';
export * from './rest/rest-errors.js';
export { A2AGrpcBinding, A2A_GRPC_METHODS, GRPC_EVENT_ID_KEY, parseGrpcTenant, type A2AGrpcCall, type A2AGrpcMethod, type A2AGrpcMethodKey } from './grpc/a2a-grpc.binding.js';
export { GRPC_CODES, GRPC_STATUS_DETAILS_KEY, toGrpcError, type GrpcCodeName, type GrpcErrorStatus } from './grpc/grpc-errors.js';
export { GrpcEndpoint } from './grpc/grpc-endpoint.js';
export { V1ListTasksRequestSchema, fromV1ListTasksRequest, toV1ListTasksResponse } from './v1/v1-list-tasks.js';
export type { V1ListTasksRequest, V1ListTasksResponse } from './v1/v1-list-tasks.js';
export { V1SendMessageRequestSchema, V1GetTaskRequestSchema, V1CancelTaskRequestSchema, V1SubscribeToTaskRequestSchema, V1UserMessageSchema, V1PartSchema } from './v1/v1.schemas.js';
export { toV1Task, toV1Message, toV1SendMessageResponse, fromV1SendMessageRequest, isoTimestamp } from './v1/v1.mapper.js';
export type { V1Task, V1Message, V1Artifact, V1TaskStatus, V1SendMessageResponse } from './v1/v1.mapper.js';
export { V03MessageSendParamsSchema, V03TaskQueryParamsSchema, V03TaskIdParamsSchema, V03PartSchema, DATA_PART_COMPAT_FLAG } from './v03/v03.schemas.js';
export { toV03Task, toV03Message, toV03Part, toV03State, toV03SendResult, fromV03MessageSendParams } from './v03/v03.mapper.js';
export type { V03Task, V03Message, V03Part, V03TaskState } from './v03/v03.mapper.js';
export { A2APushService } from './push/a2a-push.service.js';
export { PushDeliveryService, pushPayload } from './push/push-delivery.service.js';
export { toV1PushConfig, toV03PushConfig } from './push/push-schemas.js';
export { JwtVerifier, bearerChallenge, type JwtCaller } from './jwt-verifier.js';
export { annotateResult, annotateStream } from './extension-output.js';
export * from './rest/rest-routes.js';
