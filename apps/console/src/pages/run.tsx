import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { Link } from 'wouter-preact';
import { TERMINAL, enc, type Envelope, type Interaction, type RunDetail, type RunLink } from '../api';
import { ErrorNote, useSession } from '../session-context';
import { age, shortId, statusLabel, when } from '../format';
import { followRun } from '../live';
import { MessageView, PartView } from '../parts';
import { VirtualList } from '../virtual-list';

interface PushConfig {
  configId: string;
  url: string;
  status: string;
  cursor: number;
  lastError: string | null;
  attempts: number;
  deliveries: Array<{ sequence: number; statusCode: number | null; error: string | null; latencyMs: number; attemptedAt: string }>;
}

/** One line of an event: what happened, in words (the payload is one click away). */
function summary(e: Envelope): string {
  const p = e.event.payload ?? {};
  switch (e.event.type) {
    case 'run.status_changed':
      return `${p.status}${p.blockedReason ? ` (${p.blockedReason})` : ''}${p.reason ? ` — ${p.reason}` : ''}`;
    case 'message.added': {
      const text = (p.message?.parts ?? []).map((x: { text?: string }) => x.text ?? '').join(' ');
      return `${p.message?.role ?? ''}: ${text}`.slice(0, 200);
    }
    case 'artifact.updated':
      return `${p.artifact?.name ?? p.artifact?.artifactId ?? ''}${p.append ? ' (chunk)' : ''}${p.lastChunk ? ' (last)' : ''}`;
    case 'interaction.requested':
      return `${p.kind ?? ''}: ${p.title ?? (p.message?.parts ?? []).map((x: { text?: string }) => x.text ?? '').join(' ')}`.slice(0, 200);
    case 'interaction.responded':
      return `${p.decision ?? 'answered'}${p.optionId ? ` (${p.optionId})` : ''}`;
    case 'run.linked':
      return `${p.kind ?? 'delegation'} → ${String(p.childRunId ?? '').slice(0, 8)}`;
    default:
      return '';
  }
}

function EventRow(props: { env: Envelope }) {
  const e = props.env;
  return (
    <details class="event" data-sequence={e.sequence}>
      <summary>
        <span class="seq">#{e.sequence}</span> <code>{e.event.type}</code> <span class="event-summary">{summary(e)}</span>{' '}
        <time class="muted" dateTime={e.occurredAt}>
          {when(e.occurredAt)}
        </time>
      </summary>
      <pre>{JSON.stringify(e.event.payload, null, 2)}</pre>
    </details>
  );
}

/**
 * A run: its state, the live event timeline (SSE, resumed after a reconnect), the open
 * interaction with a form to answer it, cancel, messages and artifacts, the RunLink tree and the
 * push configs with their delivery attempts.
 */
export function RunPage(props: { id: string }) {
  const { api } = useSession();
  const [detail, setDetail] = useState<RunDetail | null>(null);
  const [events, setEvents] = useState<Envelope[]>([]);
  const [stream, setStream] = useState<{ state: string; info?: string }>({ state: 'connecting' });
  const [error, setError] = useState<unknown>(null);
  const [push, setPush] = useState<PushConfig[] | null>(null);
  const refreshTimer = useRef<ReturnType<typeof setTimeout> | null>(null);

  const load = useCallback(() => {
    api.get<RunDetail>(`/v1/runs/${enc(props.id)}`).then(setDetail, setError);
    api.get<{ configs: PushConfig[] }>(`/v1/runs/${enc(props.id)}/push-configs`).then((r) => setPush(r.configs), () => setPush([]));
  }, [props.id]);

  useEffect(() => {
    setDetail(null);
    setEvents([]);
    setError(null);
    load();
    const stop = followRun(api.key, props.id, 0, {
      onEvents: (batch) => {
        setEvents((prev) => [...prev, ...batch]);
        // the projections (state, messages, interactions) are re-read once a burst has passed
        if (refreshTimer.current) clearTimeout(refreshTimer.current);
        refreshTimer.current = setTimeout(load, 250);
      },
      onState: (state, info) => setStream({ state, info }),
    });
    return () => {
      stop();
      if (refreshTimer.current) clearTimeout(refreshTimer.current);
    };
  }, [props.id]);

  if (error && !detail)
    return (
      <main class="container">
        <h1>Run {shortId(props.id)}</h1>
        <ErrorNote error={error} />
      </main>
    );
  if (!detail) return <main class="container" aria-busy="true" />;
  const run = detail.run;
  const open = detail.interactions.filter((i) => i.status === 'open');
  return (
    <main class="container">
      <hgroup>
        <h1>
          Run <code>{shortId(run.id)}</code>
        </h1>
        <p>
          <span class={`badge status-${run.status}`} data-testid="run-status">
            {statusLabel(run.status, run.blockedReason)}
          </span>{' '}
          since <span title={when(run.statusAt)}>{age(run.statusAt)}</span> · created {when(run.createdAt)} · context <code>{shortId(run.contextId)}</code> ·{' '}
          <Link href={`/agents/${run.agentId}`}>agent</Link>
        </p>
      </hgroup>
      <ErrorNote error={error} />
      {open.map((i) => (
        <InteractionForm interaction={i} runId={run.id} onDone={(d) => setDetail(d)} />
      ))}
      {!TERMINAL.has(run.status) && <CancelRun runId={run.id} onDone={setDetail} />}
      <div class="grid-2">
        <section aria-labelledby="timeline-h">
          <h2 id="timeline-h">
            Timeline <small class={`stream stream-${stream.state}`} data-testid="stream-state">{stream.state}</small>
          </h2>
          {stream.info && <small class="muted">{stream.info}</small>}
          <VirtualList label="Events" items={events} estimate={44} itemKey={(e) => e.sequence} row={(e) => <EventRow env={e} />} follow height="55vh" />
          <small class="muted" data-testid="event-count">
            {events.length} events
          </small>
        </section>
        <section aria-labelledby="messages-h">
          <h2 id="messages-h">Messages</h2>
          {detail.history.length === 0 && <p class="muted">No messages.</p>}
          {detail.history.map((m) => (
            <MessageView message={m} />
          ))}
          {detail.statusMessage && (
            <>
              <h3>Status message</h3>
              <MessageView message={detail.statusMessage} />
            </>
          )}
          <h2>Artifacts</h2>
          {detail.artifacts.length === 0 && <p class="muted">No artifacts.</p>}
          {detail.artifacts.map((a) => (
            <article class="artifact">
              <header>
                <strong>{a.name ?? a.artifactId}</strong> {a.complete === false && <small class="muted">(streaming)</small>}
              </header>
              {a.parts.map((p) => (
                <PartView part={p} />
              ))}
            </article>
          ))}
        </section>
      </div>
      <LinkTree runId={run.id} links={detail.links} />
      <section aria-labelledby="interactions-h">
        <h2 id="interactions-h">Interactions</h2>
        {detail.interactions.length === 0 ? (
          <p class="muted">None.</p>
        ) : (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Kind</th>
                  <th scope="col">Status</th>
                  <th scope="col">Asked</th>
                  <th scope="col">Closed</th>
                </tr>
              </thead>
              <tbody>
                {detail.interactions.map((i) => (
                  <tr>
                    <td>
                      {i.kind}
                      {i.blocking ? '' : ' (non-blocking)'}
                    </td>
                    <td>{i.status}</td>
                    <td>{when(i.createdAt)}</td>
                    <td>{when(i.closedAt)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
      <section aria-labelledby="push-h">
        <h2 id="push-h">Push notifications</h2>
        {push === null ? (
          <p aria-busy="true" />
        ) : push.length === 0 ? (
          <p class="muted">No push configs.</p>
        ) : (
          push.map((c) => (
            <details>
              <summary>
                <code>{c.configId}</code> → {c.url} · {c.status} · delivered up to #{c.cursor} · {c.attempts} attempts{c.lastError ? ` · ${c.lastError}` : ''}
              </summary>
              <div class="table-wrap">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Seq</th>
                      <th scope="col">HTTP</th>
                      <th scope="col">Error</th>
                      <th scope="col">Latency</th>
                      <th scope="col">At</th>
                    </tr>
                  </thead>
                  <tbody>
                    {c.deliveries.map((d) => (
                      <tr>
                        <td>{d.sequence}</td>
                        <td>{d.statusCode ?? '—'}</td>
                        <td>{d.error ?? ''}</td>
                        <td>{d.latencyMs} ms</td>
                        <td>{when(d.attemptedAt)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            </details>
          ))
        )}
      </section>
    </main>
  );
}

function InteractionForm(props: { interaction: Interaction; runId: string; onDone(d: RunDetail): void }) {
  const { api } = useSession();
  const i = props.interaction;
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const prompt = useMemo(() => (i.request.message?.parts ?? []).map((p) => p.text ?? '').join(' '), [i]);
  const answer = async (body: Record<string, unknown>) => {
    setBusy(true);
    setError(null);
    try {
      props.onDone(await api.send<RunDetail>('POST', `/v1/runs/${enc(props.runId)}/interactions/${enc(i.id)}/responses`, body));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <article class="overlay" aria-labelledby={`ia-${i.id}`} data-testid="interaction">
      <header>
        <strong id={`ia-${i.id}`}>{i.request.title ?? (i.kind === 'confirmation' ? 'Confirmation needed' : i.kind === 'auth' ? 'Authorization needed' : 'Input needed')}</strong>{' '}
        <small class="muted">
          {i.kind}
          {i.blocking ? ', blocking the run' : ''}
          {i.expiresAt ? `, expires ${when(i.expiresAt)}` : ''}
        </small>
      </header>
      {prompt && <p>{prompt}</p>}
      {i.request.description && <p class="muted">{i.request.description}</p>}
      {i.request.options && i.request.options.length > 0 ? (
        <div role="group">
          {i.request.options.map((o) => (
            <button type="button" class={o.kind === 'reject' ? 'secondary' : ''} disabled={busy} onClick={() => answer({ optionId: o.id })}>
              {o.label ?? o.id}
            </button>
          ))}
        </div>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void answer({ text });
          }}
        >
          <fieldset role="group">
            <input name="answer" aria-label="Answer" value={text} required onInput={(e) => setText((e.target as HTMLInputElement).value)} />
            <button type="submit" aria-busy={busy} disabled={busy}>
              Answer
            </button>
          </fieldset>
        </form>
      )}
      <ErrorNote error={error} />
    </article>
  );
}

function CancelRun(props: { runId: string; onDone(d: RunDetail): void }) {
  const { api } = useSession();
  const [asking, setAsking] = useState(false);
  const [reason, setReason] = useState('');
  const [error, setError] = useState<unknown>(null);
  if (!asking)
    return (
      <p>
        <button type="button" class="secondary outline" onClick={() => setAsking(true)}>
          Cancel run…
        </button>
      </p>
    );
  return (
    <form
      aria-label="Cancel the run"
      onSubmit={async (e) => {
        e.preventDefault();
        try {
          props.onDone(await api.send<RunDetail>('POST', `/v1/runs/${enc(props.runId)}/cancel`, reason.trim() ? { reason: reason.trim() } : {}));
          setAsking(false);
        } catch (err) {
          setError(err);
        }
      }}
    >
      <fieldset role="group">
        <input name="reason" aria-label="Reason (optional)" placeholder="Reason (optional)" value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} />
        <button type="submit" class="contrast">
          Cancel this run
        </button>
        <button type="button" class="secondary" onClick={() => setAsking(false)}>
          Keep it
        </button>
      </fieldset>
      <ErrorNote error={error} />
    </form>
  );
}

function LinkTree(props: { runId: string; links: RunDetail['links'] }) {
  const item = (l: RunLink) => (
    <li>
      <Link href={`/runs/${l.other.runId}`}>
        <code>{shortId(l.other.runId)}</code>
      </Link>{' '}
      <small>
        {l.kind}
        {l.awaiting ? ', awaited' : ''}
      </small>{' '}
      <span class={`badge status-${l.other.status}`}>{statusLabel(l.other.status, l.other.blockedReason)}</span>
    </li>
  );
  if (props.links.parents.length === 0 && props.links.children.length === 0) return null;
  return (
    <section aria-labelledby="links-h">
      <h2 id="links-h">Run links</h2>
      <ul class="tree">
        {props.links.parents.map(item)}
        <li>
          <strong>
            this run <code>{shortId(props.runId)}</code>
          </strong>
          <ul>{props.links.children.map(item)}</ul>
        </li>
      </ul>
    </section>
  );
}
