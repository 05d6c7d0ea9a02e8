import type { IncomingMessage, ServerResponse } from 'node:http';
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { ATTR_HTTP_REQUEST_METHOD, ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_HTTP_ROUTE, ATTR_URL_PATH, ATTR_URL_SCHEME } from '@opentelemetry/semantic-conventions';
import { isTracing, tracer } from './tracing.js';

/**
 * Wrap a Node HTTP request listener so each request runs inside a server span (W3C `traceparent`
 * of the caller continued when it sent one), active for all the work the request does: its
 * database statements, the dispatches it records. The span ends when the response closes (a
 * stream: when it ends) with the status code; 5xx marks it failed. The request's and response's
 * event listeners are bound to the span's context, so work resumed from socket events (the body
 * arriving) stays inside it. When tracing is off the listener is called as is.
 */
export function tracedRequestListener<Req extends IncomingMessage, Res extends ServerResponse>(listener: (req: Req, res: Res) => void): (req: Req, res: Res) => void {
  return (req, res) => {
    if (!isTracing()) return listener(req, res);
    const parent = propagation.extract(ROOT_CONTEXT, req.headers);
    const method = req.method ?? 'GET';
    const span = tracer().startSpan(
      method,
      {
        kind: SpanKind.SERVER,
        attributes: { [ATTR_HTTP_REQUEST_METHOD]: method, [ATTR_URL_PATH]: (req.url ?? '/').split('?')[0]!, [ATTR_URL_SCHEME]: 'http' },
      },
      parent,
    );
    res.once('close', () => {
      span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, res.statusCode);
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    const ctx = trace.setSpan(parent, span);
    context.bind(ctx, req);
    context.bind(ctx, res);
    context.with(ctx, () => listener(req, res));
  };
}

/**
 * Name the active server span after the route that matched (`POST /a2a/:org/:agent`) and record
 * `http.route`. Call it from the router's first hook. No-op when off.
 */
export function nameServerSpan(method: string, route: string | undefined): void {
  if (!isTracing() || !route) return;
  const span = trace.getActiveSpan();
  if (!span) return;
  span.setAttribute(ATTR_HTTP_ROUTE, route);
  span.updateName(`${method} ${route}`);
}
