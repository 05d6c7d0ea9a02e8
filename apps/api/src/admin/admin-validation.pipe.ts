import { type ArgumentMetadata, Injectable, StandardSchemaValidationPipe } from '@nestjs/common';
import { AppError, invalidRequest } from '#libs/common';
import { isMalformedJson } from '../common/malformed-json.js';

/**
 * Validates `@Body({ schema })`, `@Query({ schema })`, `@Param(..., { schema })` with their
 * Standard Schema (zod). Failures are 422 `request.invalid` with `details.issues: [{ path,
 * message }]`; a body whose JSON did not parse is 400 `request.malformed`.
 */
@Injectable()
export class AdminValidationPipe extends StandardSchemaValidationPipe {
  constructor() {
    super({
      exceptionFactory: (issues) =>
        invalidRequest(
          issues.map((i) => ({
            path: (i.path ?? []).map((p) => (typeof p === 'object' && p !== null ? p.key : p)),
            message: i.message,
          })),
        ),
    });
  }

  override async transform<T = unknown>(value: T, metadata: ArgumentMetadata): Promise<T> {
    if (metadata.type === 'body' && isMalformedJson(value)) {
      if (value.kind === 'invalid') throw new AppError('request.invalid', `${value.path ? `${value.path}: ` : ''}${value.reason}`, { details: { issues: [{ path: value.path ?? '', message: value.reason }] } });
      throw new AppError('request.malformed', `the request body is not valid JSON: ${value.reason}`);
    }
    return super.transform(value, metadata);
  }
}
