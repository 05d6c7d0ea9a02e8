import { Global, Module } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { STRUCTURED_INPUT_LIMITS, type StructuredInputLimits } from '#libs/extensions';

/** The structured-input extension's budgets, from the configuration (docs/deploy.md). */
export function structuredInputLimits(config: AppConfig): StructuredInputLimits {
  return {
    schemaMaxBytes: config.STRUCTURED_INPUT_SCHEMA_MAX_BYTES,
    schemaMaxDepth: config.STRUCTURED_INPUT_SCHEMA_MAX_DEPTH,
    schemaMaxNodes: config.STRUCTURED_INPUT_SCHEMA_MAX_NODES,
    patternMaxChars: config.STRUCTURED_INPUT_PATTERN_MAX_CHARS,
    dataMaxChars: config.STRUCTURED_INPUT_DATA_MAX_CHARS,
    validationBudget: config.STRUCTURED_INPUT_VALIDATION_BUDGET,
    patternBudget: config.STRUCTURED_INPUT_PATTERN_BUDGET,
  };
}

/**
 * Provides the `STRUCTURED_INPUT_LIMITS` port ExtensionsModule builds the built-in extensions with
 * (libs/extensions does not read the configuration). Global, so ExtensionsModule sees it in every
 * process that imports RegistryModule (the API). Needs ConfigModule (global).
 */
@Global()
@Module({
  providers: [{ provide: STRUCTURED_INPUT_LIMITS, useFactory: structuredInputLimits, inject: [APP_CONFIG] }],
  exports: [STRUCTURED_INPUT_LIMITS],
})
export class ExtensionLimitsModule {}
