import { z } from 'zod';
import { refusedLiteral, type OutboundPolicy } from '#libs/outbound';

/**
 * Draft-time check of a runtime config's URLs: a literal IP address the outbound guard refuses is
 * a ZodError at that field (`refused: … (HTTP_RUNTIME_ALLOWED_CIDRS opens it)`). Names are checked
 * when connecting (they may resolve differently later).
 */
export function refuseLiteralAddresses<C extends object>(config: C, fields: ReadonlyArray<keyof C & string>, policy: OutboundPolicy): C {
  for (const field of fields) {
    const value = config[field];
    if (typeof value !== 'string' || !value) continue;
    // the URL parser has normalized the host already: a numeric host is a valid IP literal here
    const why = refusedLiteral(new URL(value), policy);
    if (why) throw new z.ZodError([{ code: 'custom', path: [field], message: `refused: ${why} (HTTP_RUNTIME_ALLOWED_CIDRS opens it)`, input: value }]);
  }
  return config;
}
