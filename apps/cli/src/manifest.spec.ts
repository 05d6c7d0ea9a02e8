import { describe, expect, it } from 'vitest';
import { sameBinding, sameRevisionContent } from './manifest.js';

const skill = { id: 's', name: 'S', description: 'does s', tags: ['t'] };

describe('sameRevisionContent', () => {
  const scripted = { kind: 'scripted', rules: [{ match: { text: '^hi' }, steps: [{ type: 'message', text: 'hello' }] }] };

  it('compares as the service stores: defaults filled in, key order irrelevant', () => {
    const stored = {
      protocolProfiles: { a2a: { skillsProjection: [skill], protocolVersion: '1.0', defaultInputModes: ['text/plain'] } },
      runtime: { defaultRule: 'echo', rules: [{ steps: [{ text: 'hello', type: 'message' }], match: { text: '^hi' } }], kind: 'scripted' },
    };
    expect(sameRevisionContent({ protocolProfiles: { a2a: { skillsProjection: [skill] } }, runtime: scripted }, stored)).toBe(true);
    expect(sameRevisionContent({ protocolProfiles: { a2a: { skillsProjection: [skill], capabilities: { streaming: true } } }, runtime: scripted }, stored)).toBe(false);
    expect(sameRevisionContent({ protocolProfiles: { a2a: { skillsProjection: [skill] } }, runtime: { ...scripted, defaultRule: 'echo', rules: [] } }, stored)).toBe(false);
  });

  it('never matches a manifest the service would refuse', () => {
    const stored = { protocolProfiles: { a2a: { skillsProjection: [skill] } }, runtime: scripted };
    expect(sameRevisionContent({ protocolProfiles: { a2a: { skillsProjection: [{ id: 's' }] } }, runtime: scripted }, stored)).toBe(false);
  });

  it('a2a runtime: ignores the skills and card identity the service took from the upstream card, not what the manifest gives', () => {
    const runtime = { kind: 'a2a', cardUrl: 'http://upstream.test/.well-known/agent-card.json' };
    const stored = {
      protocolProfiles: { a2a: { skillsProjection: [skill], identityProjection: { name: 'Upstream', description: 'from the card', version: '1.0.0' } } },
      runtime: { ...runtime, protocolBinding: 'JSONRPC', protocolVersion: '1.0', pollIntervalMs: 1000, timeoutMs: 600_000 },
    };
    expect(sameRevisionContent({ protocolProfiles: { a2a: {} }, runtime }, stored)).toBe(true);
    expect(sameRevisionContent({ protocolProfiles: { a2a: { identityProjection: { name: 'Upstream' } } }, runtime }, stored)).toBe(true);
    expect(sameRevisionContent({ protocolProfiles: { a2a: { identityProjection: { name: 'Mine' } } }, runtime }, stored)).toBe(false);
    expect(sameRevisionContent({ protocolProfiles: { a2a: { skillsProjection: [{ ...skill, id: 'other' }] } }, runtime }, stored)).toBe(false);
    expect(sameRevisionContent({ protocolProfiles: { a2a: {} }, runtime: { ...runtime, timeoutMs: 5000 } }, stored)).toBe(false);
  });

  it('scripted runtime: skills are compared even when the manifest gives none', () => {
    const stored = { protocolProfiles: { a2a: { skillsProjection: [skill] } }, runtime: scripted };
    expect(sameRevisionContent({ protocolProfiles: { a2a: {} }, runtime: scripted }, stored)).toBe(false);
  });

  it('a kind this CLI does not know is compared as given', () => {
    const stored = { protocolProfiles: { a2a: { skillsProjection: [skill] } }, runtime: { kind: 'custom', x: 1 } };
    expect(sameRevisionContent({ protocolProfiles: { a2a: { skillsProjection: [skill] } }, runtime: { kind: 'custom', x: 1 } }, stored)).toBe(true);
    expect(sameRevisionContent({ protocolProfiles: { a2a: { skillsProjection: [skill] } }, runtime: { kind: 'custom', x: 2 } }, stored)).toBe(false);
  });
});

describe('sameBinding', () => {
  const current = { path: '/a2a/o/a', transports: ['JSONRPC'], security: { scheme: 'none' }, extensions: [], enabled: true };

  it('fills the service defaults in before comparing', () => {
    expect(sameBinding({}, current)).toBe(true);
    expect(sameBinding({ binding: { transports: ['JSONRPC'], security: { scheme: 'none' }, enabled: true } }, current)).toBe(true);
    expect(sameBinding({ binding: { transports: ['JSONRPC', 'HTTP+JSON'] } }, current)).toBe(false);
    expect(sameBinding({ binding: { security: { scheme: 'apiKey' } } }, current)).toBe(false);
    expect(sameBinding({}, { ...current, enabled: false })).toBe(false);
    expect(sameBinding({}, null)).toBe(false);
  });
});
