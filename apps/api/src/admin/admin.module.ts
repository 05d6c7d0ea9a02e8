import { Module } from '@nestjs/common';

/** Admin REST API (/v1/...). Filled in by the admin API work. */
@Module({})
export class AdminModule {}
