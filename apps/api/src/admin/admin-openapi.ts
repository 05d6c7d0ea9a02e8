import { applyDecorators } from '@nestjs/common';
import { ApiBearerAuth, ApiResponse } from '@nestjs/swagger';
import { ErrorResponseSchema } from '#libs/contracts';

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'request.malformed: the body is not valid JSON',
  401: 'auth.missing_credentials / auth.invalid_credentials',
  403: 'auth.forbidden: the API key lacks the scope',
  404: 'not found in the caller\'s organization',
  409: 'conflict (see the error code)',
  422: 'request.invalid (details.issues) / idempotency.mismatch',
};

/** Bearer auth plus the error responses a route can give (`{ error, requestId }`). */
export function AdminRoute(...statuses: number[]): MethodDecorator & ClassDecorator {
  return applyDecorators(
    ApiBearerAuth(),
    ...[401, 403, ...statuses].map((status) =>
      ApiResponse({ status, description: ERROR_DESCRIPTIONS[status] ?? 'error', standardSchema: ErrorResponseSchema }),
    ),
  );
}
