import { describe, expect, it } from 'vitest';
import { ZodError } from 'zod';
import { defaultRuntimeRegistry, RuntimeRegistry } from './runtime.registry.js';
import { ScriptedRuntime } from './scripted/scripted.runtime.js';

describe('RuntimeRegistry', () => {
  const registry = defaultRuntimeRegistry();

  it('returns the runtime owning a kind', () => {
    expect(registry.get('scripted')).toBeInstanceOf(ScriptedRuntime);
  });

  it('throws runtime.unknown_kind for a kind nobody owns', () => {
    expect(() => registry.get('llm')).toThrow(expect.objectContaining({ code: 'runtime.unknown_kind' }));
    expect(() => registry.parse({ kind: 'llm', model: 'x' })).toThrow(
      expect.objectContaining({ code: 'runtime.unknown_kind', details: { kind: 'llm', known: ['scripted'] } }),
    );
  });

  it('parses a config with the runtime of its kind', () => {
    const { runtime, config } = registry.parse({ kind: 'scripted' });
    expect(runtime.kind).toBe('scripted');
    expect(config).toEqual({ kind: 'scripted', rules: [], defaultRule: 'echo' });
  });

  it('throws a ZodError when the kind is missing or the config is invalid for its runtime', () => {
    expect(() => registry.parse({ rules: [] })).toThrow(ZodError);
    expect(() => registry.parse('scripted')).toThrow(ZodError);
    expect(() => registry.parse({ kind: 'scripted', rules: [{ match: {}, steps: [] }] })).toThrow(ZodError);
  });

  it('refuses two runtimes of the same kind', () => {
    expect(() => new RuntimeRegistry([new ScriptedRuntime(), new ScriptedRuntime()])).toThrow(/duplicate runtime kind 'scripted'/);
  });
});
