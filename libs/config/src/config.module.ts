import { type DynamicModule, Global, Module } from '@nestjs/common';
import { APP_CONFIG, type AppConfig, loadConfig } from './config.js';

/** Provides AppConfig under APP_CONFIG. `forRoot(overrides)` lets tests and the demo set values. */
@Global()
@Module({})
export class ConfigModule {
  static forRoot(overrides: Partial<Record<keyof AppConfig, string>> = {}): DynamicModule {
    const config = loadConfig({ ...process.env, ...overrides });
    return { module: ConfigModule, providers: [{ provide: APP_CONFIG, useValue: config }], exports: [APP_CONFIG] };
  }
}
