import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Metrics } from '#libs/metrics';

/** A2A JSON-RPC method names (v1.0 and v0.3): the only values the `operation` label takes for them. */
const JSON_RPC_METHODS = new Set([
  'SendMessage', 'SendStreamingMessage', 'GetTask', 'ListTasks', 'CancelTask', 'SubscribeToTask',
  'CreateTaskPushNotificationConfig', 'GetTaskPushNotificationConfig', 'ListTaskPushNotificationConfigs',
  'DeleteTaskPushNotificationConfig', 'GetExtendedAgentCard',
  'message/send', 'message/stream', 'tasks/get', 'tasks/list', 'tasks/cancel', 'tasks/resubscribe',
  'tasks/pushNotificationConfig/set', 'tasks/pushNotificationConfig/get', 'tasks/pushNotificationConfig/list',
  'tasks/pushNotificationConfig/delete', 'agent/getAuthenticatedExtendedCard',
]);

function surfaceOf(route: string): string {
  if (route.includes('agent-card.json')) return 'card';
  if (route.startsWith('/a2a')) return 'a2a';
  if (route.startsWith('/v1')) return 'admin';
  return 'other';
}

/** The bounded `operation` label: the JSON-RPC method when known, else the route pattern. */
function operationOf(req: FastifyRequest, route: string, surface: string): string {
  if (surface === 'a2a' && req.method === 'POST' && /\/a2a\/:org\/:agent\/?$/.test(route)) {
    const method = (req.body as { method?: unknown } | undefined)?.method;
    return typeof method === 'string' && JSON_RPC_METHODS.has(method) ? method : 'jsonrpc:other';
  }
  return route || 'unmatched';
}

/**
 * Record every HTTP response into `aaas_http_requests_total` / `aaas_http_request_duration_seconds`
 * (Fastify `onResponse` hook) and serve the registry at `GET /metrics` (Prometheus text format).
 * Labels are bounded: route patterns (never raw URLs), known JSON-RPC method names, status class.
 */
export function installHttpMetrics(fastify: FastifyInstance, metrics: Metrics): void {
  fastify.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions?.url ?? '';
    const surface = surfaceOf(route);
    const operation = operationOf(req, route, surface);
    metrics.httpRequests.inc({ surface, operation, method: req.method, status: `${Math.floor(reply.statusCode / 100)}xx` });
    metrics.httpDuration.observe({ surface, operation }, reply.elapsedTime / 1000);
    done();
  });
  fastify.get('/metrics', async (_req, reply) => {
    const { contentType, body } = await metrics.expose();
    return reply.header('content-type', contentType).send(body);
  });
}
