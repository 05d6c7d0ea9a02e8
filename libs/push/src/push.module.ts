import { Module } from '@nestjs/common';
import { RunsModule } from '#libs/runs';
import { PushConfigRepository } from './push-config.repository.js';
import { PushConfigService } from './push-config.service.js';

/** Push notification configs (API and worker). Needs DbModule and the app config globally. */
@Module({
  imports: [RunsModule],
  providers: [PushConfigRepository, PushConfigService],
  exports: [PushConfigRepository, PushConfigService],
})
export class PushModule {}
