import { Injectable } from '@nestjs/common';
import type { ServedGrpc } from '../agent-card.projection.js';

/**
 * The gRPC listener of this process, as the rest of the adapter sees it: `address` is the
 * `host:port` written on cards (GRPC_PUBLIC_ADDRESS, else PUBLIC_BASE_URL's host name and the
 * bound port), set by the listener once it is bound and cleared when it stops; null = this
 * process serves no gRPC, so cards leave the GRPC interface off and admission refuses it.
 */
@Injectable()
export class GrpcEndpoint implements ServedGrpc {
  address: string | null = null;
}
