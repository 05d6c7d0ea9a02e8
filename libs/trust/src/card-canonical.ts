import canonicalize from 'canonicalize';

/**
 * Field presence of the AgentCard messages of a2a.proto (v1.0), as §8.4 canonicalization needs it:
 * - `req`: REQUIRED (field_behavior) — always kept, even at its default ("" / [] / false);
 * - `opt`: `optional` (explicit presence) — kept whenever set, even to its default;
 * - `imp`: implicit presence scalar — dropped at its default ("", 0, false);
 * - `rep` / `map`: repeated / map (not REQUIRED) — dropped when empty;
 * - `msg`: singular message — kept when present; `struct`: google.protobuf.Struct, kept as is.
 * `of` names the nested message (for req/rep/map/msg of message type).
 */
type Presence = 'req' | 'opt' | 'imp' | 'rep' | 'map' | 'msg' | 'struct';
type FieldSpec = { p: Presence; of?: string };
const F = (p: Presence, of?: string): FieldSpec => ({ p, of });

export const CARD_PRESENCE: Record<string, Record<string, FieldSpec>> = {
  AgentCard: {
    name: F('req'), description: F('req'), supportedInterfaces: F('req', 'AgentInterface'), provider: F('msg', 'AgentProvider'),
    version: F('req'), documentationUrl: F('opt'), capabilities: F('req', 'AgentCapabilities'),
    securitySchemes: F('map', 'SecurityScheme'), securityRequirements: F('rep', 'SecurityRequirement'),
    defaultInputModes: F('req'), defaultOutputModes: F('req'), skills: F('req', 'AgentSkill'), signatures: F('rep', 'AgentCardSignature'), iconUrl: F('opt'),
  },
  AgentInterface: { url: F('req'), protocolBinding: F('req'), tenant: F('imp'), protocolVersion: F('req') },
  AgentProvider: { url: F('req'), organization: F('req') },
  AgentCapabilities: { streaming: F('opt'), pushNotifications: F('opt'), extensions: F('rep', 'AgentExtension'), extendedAgentCard: F('opt') },
  AgentExtension: { uri: F('imp'), description: F('imp'), required: F('imp'), params: F('struct') },
  AgentSkill: {
    id: F('req'), name: F('req'), description: F('req'), tags: F('req'), examples: F('rep'), inputModes: F('rep'), outputModes: F('rep'),
    securityRequirements: F('rep', 'SecurityRequirement'),
  },
  AgentCardSignature: { protected: F('req'), signature: F('req'), header: F('struct') },
  StringList: { list: F('rep') },
  SecurityRequirement: { schemes: F('map', 'StringList') },
  // oneof members have explicit presence
  SecurityScheme: {
    apiKeySecurityScheme: F('msg', 'APIKeySecurityScheme'), httpAuthSecurityScheme: F('msg', 'HTTPAuthSecurityScheme'),
    oauth2SecurityScheme: F('msg', 'OAuth2SecurityScheme'), openIdConnectSecurityScheme: F('msg', 'OpenIdConnectSecurityScheme'),
    mtlsSecurityScheme: F('msg', 'MutualTlsSecurityScheme'),
  },
  APIKeySecurityScheme: { description: F('imp'), location: F('req'), name: F('req') },
  HTTPAuthSecurityScheme: { description: F('imp'), scheme: F('req'), bearerFormat: F('imp') },
  OAuth2SecurityScheme: { description: F('imp'), flows: F('req', 'OAuthFlows'), oauth2MetadataUrl: F('imp') },
  OpenIdConnectSecurityScheme: { description: F('imp'), openIdConnectUrl: F('req') },
  MutualTlsSecurityScheme: { description: F('imp') },
  OAuthFlows: {
    authorizationCode: F('msg', 'AuthorizationCodeOAuthFlow'), clientCredentials: F('msg', 'ClientCredentialsOAuthFlow'),
    implicit: F('msg', 'ImplicitOAuthFlow'), password: F('msg', 'PasswordOAuthFlow'), deviceCode: F('msg', 'DeviceCodeOAuthFlow'),
  },
  AuthorizationCodeOAuthFlow: { authorizationUrl: F('req'), tokenUrl: F('req'), refreshUrl: F('imp'), scopes: F('req'), pkceRequired: F('imp') },
  ClientCredentialsOAuthFlow: { tokenUrl: F('req'), refreshUrl: F('imp'), scopes: F('req') },
  ImplicitOAuthFlow: { authorizationUrl: F('imp'), refreshUrl: F('imp'), scopes: F('map') },
  PasswordOAuthFlow: { tokenUrl: F('imp'), refreshUrl: F('imp'), scopes: F('map') },
  DeviceCodeOAuthFlow: { deviceAuthorizationUrl: F('req'), tokenUrl: F('req'), refreshUrl: F('imp'), scopes: F('req') },
};

const isDefaultScalar = (v: unknown) => v === '' || v === 0 || v === false || v === null || v === undefined;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function strip(value: unknown, type: string | undefined): unknown {
  if (!type || !isObject(value)) return value;
  const spec = CARD_PRESENCE[type];
  if (!spec) return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const f = spec[key];
    if (v === undefined) continue;
    // a field outside the schema is kept as given: the signature covers it
    if (!f) {
      out[key] = v;
      continue;
    }
    switch (f.p) {
      case 'req':
        out[key] = Array.isArray(v) ? v.map((e) => strip(e, f.of)) : f.of ? strip(v, f.of) : v;
        break;
      case 'opt':
        if (v !== null) out[key] = v;
        break;
      case 'imp':
        if (!isDefaultScalar(v)) out[key] = v;
        break;
      case 'rep':
        if (Array.isArray(v) && v.length > 0) out[key] = v.map((e) => strip(e, f.of));
        break;
      case 'map':
        if (isObject(v) && Object.keys(v).length > 0) out[key] = Object.fromEntries(Object.entries(v).map(([k, e]) => [k, strip(e, f.of)]));
        break;
      case 'msg':
        if (v !== null) out[key] = strip(v, f.of);
        break;
      case 'struct':
        if (v !== null) out[key] = v;
        break;
    }
  }
  return out;
}

/**
 * True for an A2A v0.3 card: it names its `protocolVersion` ("0.3.0") at the top level, a field
 * the v1.0 AgentCard does not have (v1.0 puts the version on each interface).
 */
export function isV03Card(card: Record<string, unknown>): boolean {
  return typeof card.protocolVersion === 'string' && card.protocolVersion.startsWith('0.');
}

/**
 * The signed content of an Agent Card (A2A v1.0 §8.4.1): the card without `signatures`, with
 * every field at its default removed by the proto's presence rules (REQUIRED and `optional` fields
 * stay), serialized with RFC 8785 (JCS, `canonicalize`). Returns the UTF-8 string.
 *
 * A v0.3 card (`isV03Card`) is defined by a JSON Schema, not a proto: it has no presence rules
 * to apply, so its signed content is the card as served without `signatures`, in RFC 8785.
 */
export function canonicalCard(card: Record<string, unknown>): string {
  const { signatures: _signatures, ...rest } = card;
  const text = canonicalize(isV03Card(card) ? rest : strip(rest, 'AgentCard'));
  if (text === undefined) throw new Error('the card cannot be canonicalized');
  return text;
}
