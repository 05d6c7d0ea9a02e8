import { Global, Module } from '@nestjs/common';
import { DatabaseService } from './database.service.js';
import { DatabaseHealth } from './schema.health.js';

@Global()
@Module({ providers: [DatabaseService, DatabaseHealth], exports: [DatabaseService, DatabaseHealth] })
export class DbModule {}
