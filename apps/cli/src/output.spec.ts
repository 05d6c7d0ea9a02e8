import { describe, expect, it } from 'vitest';
import { ago, answerCommand, eventLine } from './output.js';

describe('ago', () => {
  const now = Date.parse('2026-05-04T12:00:00.000Z');
  it('says how long ago (or until) in the largest whole unit, by Intl.RelativeTimeFormat', () => {
    expect(ago('2026-05-04T12:00:00.000Z', now)).toBe('now');
    expect(ago('2026-05-04T11:59:15.000Z', now)).toBe('45 seconds ago');
    expect(ago('2026-05-04T11:57:00.000Z', now)).toBe('3 minutes ago');
    expect(ago('2026-05-04T09:30:00.000Z', now)).toBe('2 hours ago');
    expect(ago('2026-05-03T11:00:00.000Z', now)).toBe('yesterday');
    expect(ago('2026-04-01T12:00:00.000Z', now)).toBe('last month');
    expect(ago('2024-01-01T00:00:00.000Z', now)).toBe('2 years ago');
    expect(ago('2026-05-04T12:05:00.000Z', now)).toBe('in 5 minutes');
  });
  it('null for no time, the input when it is not a time', () => {
    expect(ago(null, now)).toBeNull();
    expect(ago(undefined, now)).toBeNull();
    expect(ago('soon', now)).toBe('soon');
  });
});

describe('eventLine for interaction.requested', () => {
  const e = { sequence: 4, event: { type: 'interaction.requested', payload: { interactionId: 'i-1', kind: 'input', message: { parts: [{ text: 'Which colour?' }] } } } };
  it('names the interaction, and with the run id, the command answering it', () => {
    expect(eventLine(e)).toBe('#4 interaction.requested input "Which colour?" [id i-1]');
    expect(eventLine(e, 'r-1')).toBe(`#4 interaction.requested input "Which colour?" [id i-1] — answer: aaas interactions answer r-1 i-1 --text '<answer>'`);
  });
  it('a confirmation is answered with an option', () => {
    expect(answerCommand('r', 'i', [{ id: 'approve' }, { id: 'reject' }])).toBe('aaas interactions answer r i --option approve');
  });
});
