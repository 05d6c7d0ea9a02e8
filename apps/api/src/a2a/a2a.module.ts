import { Module } from '@nestjs/common';

/** A2A endpoints (JSON-RPC v1.0 + v0.3, Agent Cards). Filled in by the A2A adapter work. */
@Module({})
export class A2AHttpModule {}
