import { describe, expect, it } from 'vitest';
import { PartSchema, messageText } from '#libs/contracts';

describe('PartSchema', () => {
  it('accepts exactly one content field', () => {
    expect(PartSchema.safeParse({ text: 'hi' }).success).toBe(true);
    expect(PartSchema.safeParse({ data: { a: 1 }, mediaType: 'application/json' }).success).toBe(true);
  });
  it('rejects zero or several content fields', () => {
    expect(PartSchema.safeParse({}).success).toBe(false);
    expect(PartSchema.safeParse({ text: 'a', url: 'https://x.test/a' }).success).toBe(false);
  });
  it('joins text parts', () => {
    expect(messageText([{ text: 'a' }, { data: 1 }, { text: 'b' }])).toBe('a\nb');
  });
});
