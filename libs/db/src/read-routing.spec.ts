import { describe, expect, it } from 'vitest';
import { currentReader, isWriteStatement, newReader, parseLsn, readerKeyOf, runAsReader } from './read-routing.js';

describe('read routing', () => {
  it('parses LSNs into comparable positions (NULL and garbage are null)', () => {
    expect(parseLsn('0/16B3748')).toBe(0x16b3748n);
    expect(parseLsn('16/B374D848')).toBe((0x16n << 32n) | 0xb374d848n);
    // the high half outweighs the low half
    expect(parseLsn('1/0')! > parseLsn('0/FFFFFFFF')!).toBe(true);
    expect(parseLsn(null)).toBeNull();
    expect(parseLsn('nonsense')).toBeNull();
  });

  it('tells write statements from reads (a data-modifying CTE is a write)', () => {
    expect(isWriteStatement('SELECT id FROM runs WHERE org_id = $1')).toBe(false);
    expect(isWriteStatement('INSERT INTO runs (id) VALUES ($1)')).toBe(true);
    expect(isWriteStatement('WITH gone AS (DELETE FROM runs WHERE id = $1 RETURNING 1) SELECT count(*) FROM gone')).toBe(true);
    expect(isWriteStatement('update push_configs set cursor = 1')).toBe(true);
  });

  it('keys a caller by its credential (Bearer or X-API-Key alike, never in clear), else by address', () => {
    const a = readerKeyOf('Bearer aaas_abcdefgh_secret', '10.0.0.1');
    expect(a).toBe(readerKeyOf('aaas_abcdefgh_secret', '10.0.0.2'));
    expect(a).not.toContain('secret');
    expect(readerKeyOf('aaas_other_secret', '10.0.0.1')).not.toBe(a);
    expect(readerKeyOf(undefined, '10.0.0.1')).toBe('ip:10.0.0.1');
  });

  it('keeps the reader of a request across awaits, and none outside', async () => {
    expect(currentReader()).toBeUndefined();
    const state = newReader('k', true);
    await runAsReader(state, async () => {
      await new Promise((r) => setTimeout(r, 1));
      expect(currentReader()).toBe(state);
    });
    expect(currentReader()).toBeUndefined();
  });
});
