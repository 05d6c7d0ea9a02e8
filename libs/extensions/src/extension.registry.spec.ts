import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AppError } from '#libs/common';
import { ExtensionRegistry, parseExtensionsHeader } from './extension.registry.js';
import { builtinExtensions, COMPLIANCE_EXTENSION_URI } from './builtin/builtins.js';

const A = 'https://x.test/a/v1';
const B = 'https://x.test/b/v1';
const registry = new ExtensionRegistry([
  ...builtinExtensions,
  { uri: A, description: 'a', dependsOn: [B], params: z.strictObject({ n: z.int() }) },
  { uri: B, description: 'b' },
]);

const code = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return (e as AppError).code;
  }
  return 'ok';
};

describe('ExtensionRegistry', () => {
  it('parses the header: comma separated, trimmed, deduplicated, empty entries dropped', () => {
    expect(parseExtensionsHeader(` ${A} ,${B},, ${A}`)).toEqual([A, B]);
    expect(parseExtensionsHeader(undefined)).toEqual([]);
    expect(parseExtensionsHeader([A, B])).toEqual([A, B]);
  });

  it('activates the declared URIs a request names (exact match), ignoring the rest', () => {
    const declared = [{ uri: A, params: { n: 1 } }, { uri: B }];
    expect(registry.negotiate(declared, [A, B, 'https://x.test/a/v2']).activated).toEqual([A, B]);
    expect(registry.negotiate(declared, ['https://x.test/a/v2']).activated).toEqual([]);
  });

  it('refuses a missing required extension and a missing dependency', () => {
    expect(code(() => registry.negotiate([{ uri: B, required: true }], []))).toBe('extension.required');
    expect(code(() => registry.negotiate([{ uri: A, params: { n: 1 } }, { uri: B }], [A]))).toBe('extension.dependency');
  });

  it('validates declared params, and refuses a required data-only or unknown extension', () => {
    expect(code(() => registry.validate([{ uri: A, params: { n: 'x' } }, { uri: B }], 'e'))).toBe('request.invalid');
    expect(code(() => registry.validate([{ uri: A, params: { n: 2 } }, { uri: B }], 'e'))).toBe('ok');
    // A depends on B: declared without it, no request could activate A
    expect(code(() => registry.validate([{ uri: A, params: { n: 2 } }], 'e'))).toBe('request.invalid');
    expect(code(() => registry.validate([{ uri: COMPLIANCE_EXTENSION_URI, required: true, params: { dataResidency: ['DE'] } }], 'e'))).toBe('request.invalid');
    expect(code(() => registry.validate([{ uri: 'https://unknown.test/v1', required: true }], 'e'))).toBe('request.invalid');
    expect(code(() => registry.validate([{ uri: 'https://unknown.test/v1' }], 'e'))).toBe('ok');
  });

  it('refuses registering one URI twice', () => {
    expect(() => new ExtensionRegistry([{ uri: A, description: 'x' }, { uri: A, description: 'y' }])).toThrow(/registered twice/);
  });
});
