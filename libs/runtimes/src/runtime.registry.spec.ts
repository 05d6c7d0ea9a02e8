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

  it('parses a revision once: later calls neither load nor parse it again; a config that fails is not kept', async () => {
    const fresh = defaultRuntimeRegistry();
    let loads = 0;
    const load = () => {
      loads++;
      return { kind: 'scripted' };
    };
    const first = await fresh.parseRevision('rev-1', load);
    const again = await fresh.parseRevision('rev-1', load);
    expect(again).toBe(first);
    expect(loads).toBe(1);
    expect(first.config).toEqual({ kind: 'scripted', rules: [], defaultRule: 'echo' });
    // an invalid config throws as parse does, every time (it is read again, never kept)
    let bad = 0;
    const invalid = async () => {
      bad++;
      return { kind: 'llm' };
    };
    await expect(fresh.parseRevision('rev-2', invalid)).rejects.toMatchObject({ code: 'runtime.unknown_kind' });
    await expect(fresh.parseRevision('rev-2', invalid)).rejects.toMatchObject({ code: 'runtime.unknown_kind' });
    expect(bad).toBe(2);
    // what the load throws reaches the caller as it is
    const down = new Error('database down');
    await expect(fresh.parseRevision('rev-3', () => Promise.reject(down))).rejects.toBe(down);
  });

  it('refuses two runtimes of the same kind', () => {
    expect(() => new RuntimeRegistry([new ScriptedRuntime(), new ScriptedRuntime()])).toThrow(/duplicate runtime kind 'scripted'/);
  });
});
