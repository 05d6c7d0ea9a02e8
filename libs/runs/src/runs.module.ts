import { Module } from '@nestjs/common';
import { EventLogRepository } from './event-log.repository.js';
import { RunDispatcher } from './run-dispatcher.js';
import { RunNotifier } from './run-notifier.js';
import { RunRepository } from './run.repository.js';
import { RunService } from './run.service.js';
import { RunStreamHub } from './run-stream.js';

/** Runs, the event log and its wake-up signals. Needs DbModule and ConfigModule (global). */
@Module({
  providers: [EventLogRepository, RunRepository, RunNotifier, RunDispatcher, RunService, RunStreamHub],
  exports: [RunService, RunRepository, RunNotifier, RunDispatcher, EventLogRepository, RunStreamHub],
})
export class RunsModule {}
