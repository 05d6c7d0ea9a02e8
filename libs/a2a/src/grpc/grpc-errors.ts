import { encodeGrpcStatusDetails } from '@a2a-js/sdk/errors/grpc';
import { A2A_ERRORS, GRPC_CODES, type A2AError, type A2AErrorRow, type GrpcCodeName } from '../a2a.errors.js';

export { GRPC_CODES, type GrpcCodeName };

/** Trailing metadata key of the binary `google.rpc.Status` (A2A v1.0 §10.6). */
export const GRPC_STATUS_DETAILS_KEY = 'grpc-status-details-bin';

/** A refused gRPC call: its status, message and the `grpc-status-details-bin` trailer. */
export interface GrpcErrorStatus {
  code: number;
  codeName: GrpcCodeName;
  message: string;
  /** `google.rpc.Status{code, message, details: [ErrorInfo{reason, domain: a2a-protocol.org, metadata}]}`, encoded. */
  statusDetails: Buffer;
}

/**
 * The gRPC answer to an A2A error (A2A v1.0 §5.4 / §10.6): the gRPC status of its row in the one
 * error table (`A2A_ERRORS`, also read by the JSON-RPC and HTTP+JSON edges), and the same ErrorInfo
 * (`reason` as the SDK's error classes read it, `metadata` as the other bindings send it) in
 * `grpc-status-details-bin`. An `unavailable` InternalError (a dependency cannot serve the request
 * now) is UNAVAILABLE, so gRPC clients retry it as they would a 503 (the edge adds `retry-after`).
 */
export function toGrpcError(error: A2AError): GrpcErrorStatus {
  const row: A2AErrorRow = A2A_ERRORS[error.type];
  const codeName: GrpcCodeName = error.unavailable ? 'UNAVAILABLE' : row.grpc;
  const code = GRPC_CODES[codeName];
  const reason = row.wireReason ?? row.reason;
  return { code, codeName, message: error.message, statusDetails: encodeGrpcStatusDetails(code, error.message, reason, error.metadata) };
}
