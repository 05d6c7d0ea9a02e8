import { Module } from '@nestjs/common';
import { A2AModule } from '#libs/a2a';
import { A2AHttpModule } from '../a2a/a2a.module.js';
import { A2AGrpcServer } from './a2a-grpc.server.js';

/**
 * The A2A gRPC listener (GRPC_PORT; off when unset), started when the app boots and stopped
 * first when it closes. It shares admission and per-caller stream slots with the HTTP bindings.
 */
@Module({
  imports: [A2AModule, A2AHttpModule],
  providers: [A2AGrpcServer],
  exports: [A2AGrpcServer],
})
export class GrpcModule {}
