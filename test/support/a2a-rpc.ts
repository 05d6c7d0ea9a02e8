import { randomUUID } from 'node:crypto';

/**
 * A JSON-RPC v1.0 `SendMessage` with a fresh messageId and one text part, POSTed to an agent's
 * endpoint `url`. `returnImmediately`: the task comes back while it still runs. Resolves to the
 * HTTP status and the parsed JSON-RPC response.
 */
export async function sendMessageRpc(
  url: string,
  text: string,
  opts: { returnImmediately?: boolean; contextId?: string; configuration?: Record<string, unknown> } = {},
): Promise<{ status: number; body: any }> {
  const configuration = { ...(opts.returnImmediately && { returnImmediately: true }), ...opts.configuration };
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'SendMessage',
      params: {
        message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...(opts.contextId && { contextId: opts.contextId }) },
        ...(Object.keys(configuration).length > 0 && { configuration }),
      },
    }),
  });
  return { status: res.status, body: await res.json() };
}
