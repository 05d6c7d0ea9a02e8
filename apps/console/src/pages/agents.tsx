import { diffLines, type Change } from 'diff';
import { verifyAgentCard, type SignatureCheck } from '#libs/trust';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { Link } from 'wouter-preact';
import { enc, type Agent, type Binding, type Revision } from '../api';
import { ErrorNote, useSession } from '../session-context';
import { age, when } from '../format';

/** The organization's agents, searchable by slug, name and description. */
export function AgentsPage() {
  const { api } = useSession();
  const [agents, setAgents] = useState<Agent[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [q, setQ] = useState('');
  useEffect(() => {
    api.get<{ agents: Agent[] }>('/v1/agents').then((r) => setAgents(r.agents), setError);
  }, []);
  const shown = useMemo(() => {
    const needle = q.trim().toLowerCase();
    return (agents ?? []).filter((a) => !needle || `${a.slug} ${a.name} ${a.description}`.toLowerCase().includes(needle));
  }, [agents, q]);
  return (
    <main class="container">
      <h1>Agents</h1>
      <input type="search" aria-label="Search agents" placeholder="Search agents" value={q} onInput={(e) => setQ((e.target as HTMLInputElement).value)} />
      <ErrorNote error={error} />
      <div class="table-wrap" aria-busy={agents === null && !error}>
        <table class="striped">
          <thead>
            <tr>
              <th scope="col">Slug</th>
              <th scope="col">Name</th>
              <th scope="col">Active revision</th>
              <th scope="col">Updated</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((a) => (
              <tr>
                <td>
                  <Link href={`/agents/${a.id}`}>{a.slug}</Link>
                  {a.isDefault && <small class="muted"> (default)</small>}
                </td>
                <td>{a.name}</td>
                <td>{a.activeRevisionId ? <code>{a.activeRevisionId.slice(0, 8)}</code> : <span class="muted">none</span>}</td>
                <td title={when(a.updatedAt)}>{age(a.updatedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {agents && shown.length === 0 && <p>No agents match.</p>}
      </div>
    </main>
  );
}

const revisionText = (r: Revision) => JSON.stringify({ protocolProfiles: r.protocolProfiles, runtime: r.runtime }, null, 2) + '\n';

/**
 * An agent: its revisions (diff any two, publish a draft, activate a published one), its A2A
 * binding and security, the Agent Card as projected with its signatures verified in the browser
 * against the organization's JWKS, and the extensions it declares.
 */
export function AgentPage(props: { id: string }) {
  const { api } = useSession();
  const [agent, setAgent] = useState<Agent | null>(null);
  const [revisions, setRevisions] = useState<Revision[]>([]);
  const [binding, setBinding] = useState<Binding | null | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [pair, setPair] = useState<[string, string] | null>(null);
  const load = () => {
    setError(null);
    api.get<Agent>(`/v1/agents/${enc(props.id)}`).then(setAgent, setError);
    api.get<{ revisions: Revision[] }>(`/v1/agents/${enc(props.id)}/revisions`).then((r) => {
      const revs = [...r.revisions].sort((a, b) => b.number - a.number);
      setRevisions(revs);
      if (revs.length >= 2) setPair((p) => p ?? [revs[1]!.id, revs[0]!.id]);
    }, setError);
    api.get<Binding>(`/v1/agents/${enc(props.id)}/bindings/a2a`).then(setBinding, () => setBinding(null));
  };
  useEffect(load, [props.id]);
  const act = async (method: 'POST' | 'PUT', path: string, body?: unknown) => {
    try {
      await api.send(method, path, body);
      load();
    } catch (e) {
      setError(e);
    }
  };
  if (!agent) return <main class="container" aria-busy={!error}>{error ? <ErrorNote error={error} /> : null}</main>;
  const byId = new Map(revisions.map((r) => [r.id, r]));
  return (
    <main class="container">
      <hgroup>
        <h1>{agent.name}</h1>
        <p>
          <code>{agent.slug}</code> · {agent.description}
        </p>
      </hgroup>
      <ErrorNote error={error} />
      <section aria-labelledby="revisions-h">
        <h2 id="revisions-h">Revisions</h2>
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
                <th scope="col">Published</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {revisions.map((r) => (
                <tr data-revision={r.number}>
                  <td>
                    {r.number}
                    {agent.activeRevisionId === r.id && <strong> (active)</strong>}
                  </td>
                  <td>{r.status}</td>
                  <td>{when(r.createdAt)}</td>
                  <td>{when(r.publishedAt)}</td>
                  <td>
                    {r.status === 'draft' && (
                      <button type="button" class="small" onClick={() => act('POST', `/v1/agents/${enc(agent.id)}/revisions/${enc(r.id)}/publish`)}>
                        Publish
                      </button>
                    )}
                    {r.status === 'published' && agent.activeRevisionId !== r.id && (
                      <button type="button" class="small" onClick={() => act('PUT', `/v1/agents/${enc(agent.id)}/active-revision`, { revisionId: r.id })}>
                        Activate
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {revisions.length >= 2 && pair && (
          <RevisionDiff
            revisions={revisions}
            pair={pair}
            onPair={setPair}
            from={byId.get(pair[0])}
            to={byId.get(pair[1])}
          />
        )}
      </section>
      <section aria-labelledby="binding-h">
        <h2 id="binding-h">A2A binding</h2>
        {binding === undefined ? (
          <p aria-busy="true" />
        ) : binding === null ? (
          <p class="muted">No A2A binding: the agent is not exposed.</p>
        ) : (
          <>
            <dl class="facts">
              <dt>Path</dt>
              <dd>
                <code>{binding.path}</code> {binding.enabled ? '' : <strong>(disabled)</strong>}
              </dd>
              <dt>Transports</dt>
              <dd>{binding.transports.join(', ')}</dd>
              <dt>Security</dt>
              <dd>
                <code>{JSON.stringify(binding.security)}</code>
              </dd>
              <dt>Extensions</dt>
              <dd>
                {binding.extensions.length === 0
                  ? 'none'
                  : binding.extensions.map((x) => (
                      <div>
                        <code>{x.uri}</code>
                        {x.required ? ' (required)' : ''} {x.description && <small class="muted">{x.description}</small>}
                      </div>
                    ))}
              </dd>
            </dl>
            {binding.enabled && <CardView path={binding.path} />}
          </>
        )}
      </section>
    </main>
  );
}

function RevisionDiff(props: { revisions: Revision[]; pair: [string, string]; onPair(p: [string, string]): void; from?: Revision; to?: Revision }) {
  const changes: Change[] = useMemo(() => (props.from && props.to ? diffLines(revisionText(props.from), revisionText(props.to)) : []), [props.from, props.to]);
  const pick = (i: 0 | 1) => (
    <select
      aria-label={i === 0 ? 'From revision' : 'To revision'}
      value={props.pair[i]}
      onChange={(e) => {
        const next: [string, string] = [...props.pair];
        next[i] = (e.target as HTMLSelectElement).value;
        props.onPair(next);
      }}
    >
      {props.revisions.map((r) => (
        <option value={r.id}>
          #{r.number} ({r.status})
        </option>
      ))}
    </select>
  );
  return (
    <details open>
      <summary>Compare revisions</summary>
      <div class="grid">
        {pick(0)}
        {pick(1)}
      </div>
      <pre class="diff" aria-label="Revision diff" data-testid="revision-diff">
        {changes.map((c) => (
          <span class={c.added ? 'add' : c.removed ? 'del' : 'same'}>
            {c.value
              .replace(/\n$/, '')
              .split('\n')
              .map((line) => `${c.added ? '+ ' : c.removed ? '- ' : '  '}${line}\n`)
              .join('')}
          </span>
        ))}
      </pre>
    </details>
  );
}

/** The Agent Card as a client fetches it, and each signature checked against the JWKS it names (same origin only). */
function CardView(props: { path: string }) {
  const [card, setCard] = useState<Record<string, unknown> | null>(null);
  const [result, setResult] = useState<{ valid: boolean; checks: SignatureCheck[] } | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    (async () => {
      const res = await fetch(`${props.path}/.well-known/agent-card.json`, { credentials: 'omit', cache: 'no-store' });
      if (!res.ok) throw new Error(`the card answered HTTP ${res.status}`);
      const c = (await res.json()) as Record<string, unknown>;
      setCard(c);
      const jwksCache = new Map<string, Promise<{ keys: Array<Record<string, unknown>> }>>();
      setResult(
        await verifyAgentCard(
          c,
          async (kid, jku) => {
            if (!jku) return null;
            const url = new URL(jku, location.origin);
            if (!jwksCache.has(url.href)) jwksCache.set(url.href, fetch(url.pathname, { credentials: 'omit' }).then((r) => r.json()));
            const jwks = await jwksCache.get(url.href)!;
            return (jwks.keys.find((k) => k.kid === kid) as never) ?? null;
          },
          { trustedJku: [location.origin] },
        ),
      );
    })().catch((e) => setError(e instanceof Error ? e.message : String(e)));
  }, [props.path]);
  const exts = ((card?.capabilities as { extensions?: Array<{ uri: string; required?: boolean }> } | undefined)?.extensions ?? []) as Array<{ uri: string; required?: boolean }>;
  return (
    <details>
      <summary>
        Agent Card{' '}
        <span data-testid="card-signature" class={result ? (result.valid ? 'ok' : 'bad') : ''}>
          {error ? `not available: ${error}` : !result ? 'checking…' : result.valid ? 'signature verified' : `not verified: ${result.checks.map((c) => c.reason).filter(Boolean).join('; ')}`}
        </span>
      </summary>
      {result && (
        <ul>
          {result.checks.map((c) => (
            <li>
              {c.index >= 0 ? `signature ${c.index + 1}` : 'signatures'}: {c.kid && <code>{c.kid}</code>} {c.alg} — {c.valid ? 'valid' : c.reason}
            </li>
          ))}
        </ul>
      )}
      {exts.length > 0 && (
        <p>
          Extensions declared: {exts.map((x) => <code>{x.uri}{x.required ? ' (required)' : ''} </code>)}
        </p>
      )}
      {card && <pre>{JSON.stringify(card, null, 2)}</pre>}
    </details>
  );
}
