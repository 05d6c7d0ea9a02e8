/**
 * Body placeholder for a request whose JSON did not parse. The body parser never rejects the
 * request itself, so each edge answers in its own protocol: the admin API with a 400
 * `request.malformed`, the A2A JSON-RPC binding with JSON-RPC error -32700 (Parse error).
 */
export class MalformedJson {
  constructor(readonly reason: string) {}
}

export function isMalformedJson(body: unknown): body is MalformedJson {
  return body instanceof MalformedJson;
}
