import { describe, expect, it } from 'vitest';
import { AgentCard as SdkAgentCard } from '@a2a-js/sdk';
import { A2AProfileSchema } from '#libs/contracts';
import type { ResolvedA2AAgent } from '#libs/registry';
import { missingRequiredCardFields, projectAgentCard, SERVED_CAPABILITIES, toV03AgentCard } from './agent-card.projection.js';

function resolved(over: { a2a?: object; binding?: Partial<ResolvedA2AAgent['binding']>; agent?: Partial<ResolvedA2AAgent['agent']> } = {}): ResolvedA2AAgent {
  return {
    org: { id: 'o1', slug: 'acme', name: 'Acme' },
    agent: {
      id: 'a1',
      slug: 'echo',
      name: 'Echo',
      description: 'Echoes what you say',
      provider: null,
      documentationUrl: null,
      iconUrl: null,
      isDefault: false,
      ...over.agent,
    },
    revision: {
      id: 'r1',
      number: 1,
      a2a: A2AProfileSchema.parse({ skillsProjection: [{ id: 'echo', name: 'Echo', description: 'echo', tags: ['demo'] }], ...over.a2a }),
      runtime: { kind: 'scripted' },
      publishedAt: new Date('2026-01-01T00:00:00Z'),
    },
    binding: { id: 'b1', transports: ['JSONRPC'], path: '/a2a/acme/echo', security: { scheme: 'none' }, extensions: [], ...over.binding },
    modifiedAt: new Date('2026-01-01T00:00:00Z'),
  };
}

describe('projectAgentCard', () => {
  it('projects identity, one JSON-RPC URL for v1.0 (preferred) and v0.3, modes and skills', () => {
    const card = projectAgentCard(resolved(), 'https://agents.example.com/')!;
    expect(card).toEqual({
      name: 'Echo',
      description: 'Echoes what you say',
      supportedInterfaces: [
        { url: 'https://agents.example.com/a2a/acme/echo', protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
        { url: 'https://agents.example.com/a2a/acme/echo', protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
      ],
      version: '1.0.0',
      capabilities: { streaming: false, pushNotifications: false, extendedAgentCard: false },
      defaultInputModes: ['text/plain'],
      defaultOutputModes: ['text/plain'],
      skills: [{ id: 'echo', name: 'Echo', description: 'echo', tags: ['demo'] }],
    });
    expect(missingRequiredCardFields(card)).toEqual([]);
  });

  it('lets identityProjection override name, description and version, and carries provider, docs and icon', () => {
    const card = projectAgentCard(
      resolved({
        a2a: { identityProjection: { name: 'Echo Pro', description: 'Better echo', version: '2.1.0' } },
        agent: { provider: { organization: 'Acme Inc', url: 'https://acme.test' }, documentationUrl: 'https://docs.acme.test', iconUrl: 'https://acme.test/i.png' },
      }),
      'http://h:1',
    )!;
    expect(card).toMatchObject({
      name: 'Echo Pro',
      description: 'Better echo',
      version: '2.1.0',
      provider: { url: 'https://acme.test', organization: 'Acme Inc' },
      documentationUrl: 'https://docs.acme.test',
      iconUrl: 'https://acme.test/i.png',
    });
  });

  it('lists each served transport in the binding order (HTTP+JSON in 1.0 only, at the same URL), and none without transports', () => {
    const both = projectAgentCard(resolved({ binding: { transports: ['HTTP+JSON', 'JSONRPC'] } }), 'http://h')!;
    expect(both.supportedInterfaces).toEqual([
      { url: 'http://h/a2a/acme/echo', protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
      { url: 'http://h/a2a/acme/echo', protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      { url: 'http://h/a2a/acme/echo', protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
    ]);
    expect(missingRequiredCardFields(both)).toEqual([]);
    const restOnly = projectAgentCard(resolved({ binding: { transports: ['HTTP+JSON'] } }), 'http://h')!;
    expect(restOnly.supportedInterfaces).toEqual([{ url: 'http://h/a2a/acme/echo', protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' }]);
    // no v0.3 HTTP+JSON binding is offered: a REST-only agent has no v0.3 card
    expect(toV03AgentCard(restOnly)).toBeNull();
    expect(projectAgentCard(resolved({ binding: { transports: [] } }), 'http://h')).toBeNull();
  });

  it('caps declared capabilities by what is served; signedAgentCard is no card field (the card carries signatures)', () => {
    const card = projectAgentCard(resolved({ a2a: { capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: true, signedAgentCard: true }, extendedCard: {} } }), 'http://h')!;
    expect(card.capabilities).toEqual({
      streaming: SERVED_CAPABILITIES.streaming,
      pushNotifications: SERVED_CAPABILITIES.pushNotifications,
      extendedAgentCard: SERVED_CAPABILITIES.extendedAgentCard,
    });
  });

  it('claims the extended card exactly when it is served (declared and configured), in both versions', () => {
    const declaredOnly = projectAgentCard(resolved({ a2a: { capabilities: { extendedAgentCard: true } } }), 'http://h')!;
    expect(declaredOnly.capabilities.extendedAgentCard).toBe(false);
    expect(toV03AgentCard(declaredOnly)!.supportsAuthenticatedExtendedCard).toBe(false);
    const served = projectAgentCard(resolved({ a2a: { capabilities: { extendedAgentCard: true }, extendedCard: { description: 'more' } } }), 'http://h')!;
    expect(served.capabilities.extendedAgentCard).toBe(true);
    expect(toV03AgentCard(served)!.supportsAuthenticatedExtendedCard).toBe(true);
  });

  it('an open binding serving the extended card declares the API key fetching it needs, anonymous first', () => {
    const card = projectAgentCard(resolved({ a2a: { capabilities: { extendedAgentCard: true }, extendedCard: {} } }), 'http://h')!;
    expect(Object.keys(card.securitySchemes!)).toEqual(['apiKey']);
    expect(card.securityRequirements).toEqual([{ schemes: {} }, { schemes: { apiKey: {} } }]);
    expect(toV03AgentCard(card)!.security).toEqual([{}, { apiKey: [] }]);
    expect(missingRequiredCardFields(card)).toEqual([]);
  });

  it('alternatives (anyOf): every scheme declared, one requirement per alternative, in order', () => {
    const jwt = { scheme: 'jwt' as const, issuer: 'https://idp.example/', audience: 'agents', jwksUri: 'https://idp.example/jwks', requiredScopes: [], maxTokenLifetimeSeconds: 3600 };
    const card = projectAgentCard(resolved({ binding: { security: { scheme: 'anyOf', anyOf: [{ scheme: 'apiKey' }, jwt] } } }), 'http://h')!;
    expect(Object.keys(card.securitySchemes!)).toEqual(['apiKey', 'bearer']);
    expect(card.securityRequirements).toEqual([{ schemes: { apiKey: {} } }, { schemes: { bearer: { list: [] } } }]);
    expect(toV03AgentCard(card)!.security).toEqual([{ apiKey: [] }, { bearer: [] }]);
    const back = SdkAgentCard.toJSON(SdkAgentCard.fromJSON(card)) as Record<string, unknown>;
    expect(back).toMatchObject(JSON.parse(JSON.stringify({ securitySchemes: card.securitySchemes })));
  });

  it('merges revision and binding extensions by URI (the binding wins a duplicate)', () => {
    const card = projectAgentCard(
      resolved({
        a2a: { extensions: [{ uri: 'urn:x:a', description: 'from revision' }, { uri: 'urn:x:b' }] },
        binding: { extensions: [{ uri: 'urn:x:a', description: 'from binding', required: true }, { uri: 'urn:x:c' }] },
      }),
      'http://h',
    )!;
    expect(card.capabilities.extensions).toEqual([
      { uri: 'urn:x:a', description: 'from binding', required: true },
      { uri: 'urn:x:b' },
      { uri: 'urn:x:c' },
    ]);
  });

  it('declares an apiKey binding as an APIKeySecurityScheme in header X-API-Key, and requires it', () => {
    const card = projectAgentCard(resolved({ binding: { security: { scheme: 'apiKey' } } }), 'http://h')!;
    expect(card.securitySchemes).toEqual({
      apiKey: { apiKeySecurityScheme: { description: expect.any(String), location: 'header', name: 'X-API-Key' } },
    });
    expect(card.securityRequirements).toEqual([{ schemes: { apiKey: {} } }]);
    expect(projectAgentCard(resolved(), 'http://h')!.securitySchemes).toBeUndefined();
    expect(missingRequiredCardFields(card)).toEqual([]);
  });

  it('omits empty optional skill arrays but keeps given ones', () => {
    const card = projectAgentCard(
      resolved({ a2a: { skillsProjection: [{ id: 's', name: 'S', description: 'd', tags: ['t'], examples: [], inputModes: ['application/json'] }] } }),
      'http://h',
    )!;
    expect(card.skills).toEqual([{ id: 's', name: 'S', description: 'd', tags: ['t'], inputModes: ['application/json'] }]);
  });

  it('falls back to the name when the agent has no description (description is REQUIRED)', () => {
    const card = projectAgentCard(resolved({ agent: { description: '' } }), 'http://h')!;
    expect(card.description).toBe('Echo');
    expect(missingRequiredCardFields(card)).toEqual([]);
  });

  it('round-trips through the SDK AgentCard codec unchanged (valid ProtoJSON)', () => {
    const card = projectAgentCard(resolved({ binding: { security: { scheme: 'apiKey' } } }), 'http://h')!;
    const back = SdkAgentCard.toJSON(SdkAgentCard.fromJSON(card)) as Record<string, unknown>;
    expect(back).toMatchObject(JSON.parse(JSON.stringify(card)));
  });
});

describe('toV03AgentCard', () => {
  it('re-shapes the v1.0 card for v0.3 callers: top-level url and transport, OpenAPI-style security', () => {
    const v1 = projectAgentCard(resolved({ binding: { security: { scheme: 'apiKey' } } }), 'http://h')!;
    expect(toV03AgentCard(v1)).toEqual({
      protocolVersion: '0.3.0',
      name: 'Echo',
      description: 'Echoes what you say',
      url: 'http://h/a2a/acme/echo',
      preferredTransport: 'JSONRPC',
      additionalInterfaces: [{ url: 'http://h/a2a/acme/echo', transport: 'JSONRPC' }],
      version: '1.0.0',
      capabilities: { streaming: false, pushNotifications: false },
      securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: expect.any(String) } },
      security: [{ apiKey: [] }],
      defaultInputModes: ['text/plain'],
      defaultOutputModes: ['text/plain'],
      skills: [{ id: 'echo', name: 'Echo', description: 'echo', tags: ['demo'] }],
      supportsAuthenticatedExtendedCard: false,
    });
  });
});

describe('missingRequiredCardFields', () => {
  it('names every REQUIRED field of a2a.proto that is missing or empty', () => {
    const broken = {
      name: '',
      description: 'd',
      version: '',
      capabilities: {},
      supportedInterfaces: [{ url: 'http://h', protocolBinding: '', protocolVersion: '1.0' }],
      defaultInputModes: [],
      defaultOutputModes: ['text/plain'],
      skills: [{ id: 'x', name: 'X', description: '', tags: [] }],
    } as unknown as Parameters<typeof missingRequiredCardFields>[0];
    expect(missingRequiredCardFields(broken)).toEqual([
      'name',
      'version',
      'defaultInputModes',
      'supportedInterfaces.0.protocolBinding',
      'skills.0.description',
      'skills.0.tags',
    ]);
  });
});
