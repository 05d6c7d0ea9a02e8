import { encodeGrpcStatusDetails } from '@a2a-js/sdk/errors/grpc';
import { A2A_ERRORS, GRPC_CODES, type A2AError, type A2AErrorRow, type GrpcCodeName } from '../a2a.errors.js';

export { GRPC_CODES, type GrpcCodeName };

/** Trailing metadata key of the binary `google.rpc.Status` (A2A v1.0 §10.6). */
export const GRPC_STATUS_DETAILS_KEY = 'grpc-status-details-bin';

/** Longest status message (characters) a gRPC error carries, in its status and in its ErrorInfo's Status. */
export const GRPC_ERROR_MESSAGE_MAX = 400;
/** Longest ErrorInfo metadata value (characters): ids a request echoes (a task id, a field) are cut to it. */
export const GRPC_ERROR_METADATA_VALUE_MAX = 200;
/** Most ErrorInfo metadata entries sent. */
const GRPC_ERROR_METADATA_ENTRIES_MAX = 16;

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
 * Both travel in trailers, which a client reads whole before it sees the status: the message is
 * cut to GRPC_ERROR_MESSAGE_MAX characters and each metadata value to GRPC_ERROR_METADATA_VALUE_MAX
 * (at most 16 entries), so an id echoed from a request cannot make the trailers large.
 */
export function toGrpcError(error: A2AError): GrpcErrorStatus {
  const row: A2AErrorRow = A2A_ERRORS[error.type];
  const codeName: GrpcCodeName = error.unavailable ? 'UNAVAILABLE' : row.grpc;
  const code = GRPC_CODES[codeName];
  const reason = row.wireReason ?? row.reason;
  const message = cut(error.message, GRPC_ERROR_MESSAGE_MAX);
  const metadata = error.metadata
    ? Object.fromEntries(
        Object.entries(error.metadata)
          .slice(0, GRPC_ERROR_METADATA_ENTRIES_MAX)
          .map(([k, v]) => [cut(k, GRPC_ERROR_METADATA_VALUE_MAX), cut(v, GRPC_ERROR_METADATA_VALUE_MAX)]),
      )
    : undefined;
  return { code, codeName, message, statusDetails: encodeGrpcStatusDetails(code, message, reason, metadata) };
}

/** `s` cut to at most `max` characters, the cut marked with `…`, never between the halves of a surrogate pair. */
function cut(s: string, max: number): string {
  if (s.length <= max) return s;
  let end = max - 1;
  if (/[\uD800-\uDBFF]/.test(s[end - 1] ?? '')) end--;
  return `${s.slice(0, end)}…`;
}
