import { useEffect, useState } from 'preact/hooks';
import { enc, type ApiKey, type SigningKey } from '../api';
import { ErrorNote, useSession } from '../session-context';
import { age, when } from '../format';

/** Prometheus text → series name → [labels, value] (only the `aaas_` series the page shows). */
function parseMetrics(text: string): Map<string, Array<{ labels: Record<string, string>; value: number }>> {
  const out = new Map<string, Array<{ labels: Record<string, string>; value: number }>>();
  for (const line of text.split('\n')) {
    const m = /^(aaas_[a-z_]+)(?:\{([^}]*)\})?\s+(\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const kv of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[kv[1]!] = kv[2]!;
    const list = out.get(m[1]!) ?? [];
    list.push({ labels, value: Number(m[3]) });
    out.set(m[1]!, list);
  }
  return out;
}

/** API keys, signing keys (create, rotate, retire) and a small health and metrics summary. */
export function OperationsPage() {
  return (
    <main class="container">
      <h1>Operations</h1>
      <Health />
      <ApiKeys />
      <SigningKeys />
    </main>
  );
}

function Health() {
  const [ready, setReady] = useState<{ status: string; info?: Record<string, { status: string }>; error?: Record<string, { status: string }> } | null>(null);
  const [metrics, setMetrics] = useState<ReturnType<typeof parseMetrics> | null>(null);
  useEffect(() => {
    fetch('/healthz/dependencies', { credentials: 'omit' })
      .then((r) => r.json())
      .then(setReady, () => setReady({ status: 'unreachable' }));
    fetch('/metrics', { credentials: 'omit' })
      .then((r) => (r.ok ? r.text() : ''))
      .then((t) => setMetrics(parseMetrics(t)), () => setMetrics(new Map()));
  }, []);
  const sum = (name: string, by?: string) => {
    const rows = metrics?.get(name) ?? [];
    if (!by) return rows.reduce((n, r) => n + r.value, 0);
    const m = new Map<string, number>();
    for (const r of rows) m.set(r.labels[by] ?? '', (m.get(r.labels[by] ?? '') ?? 0) + r.value);
    return m;
  };
  const byStatus = sum('aaas_run_status_changes_total', 'status') as Map<string, number>;
  const queue = sum('aaas_queue_jobs', 'state') as Map<string, number>;
  const deliveries = sum('aaas_push_deliveries_total', 'outcome') as Map<string, number>;
  const deps = { ...(ready?.info ?? {}), ...(ready?.error ?? {}) };
  return (
    <section aria-labelledby="health-h">
      <h2 id="health-h">Health</h2>
      <p>
        Service: <strong data-testid="health-status">{ready?.status ?? '…'}</strong>{' '}
        {Object.entries(deps).map(([k, v]) => (
          <span class={`badge ${v.status === 'up' ? 'ok' : 'bad'}`}>
            {k}: {v.status}
          </span>
        ))}
      </p>
      <div class="grid">
        <article>
          <header>Queue (jobs by state)</header>
          {queue.size === 0 ? <p class="muted">not reported by this process</p> : <dl class="facts">{[...queue].map(([k, v]) => [<dt>{k || 'jobs'}</dt>, <dd>{v}</dd>])}</dl>}
          <small class="muted">Outbox pending: {String(sum('aaas_outbox_pending'))}</small>
        </article>
        <article>
          <header>Status changes since this API process started</header>
          {byStatus.size === 0 ? <p class="muted">none yet</p> : <dl class="facts">{[...byStatus].map(([k, v]) => [<dt>{k}</dt>, <dd>{v}</dd>])}</dl>}
        </article>
        <article>
          <header>Push deliveries</header>
          {deliveries.size === 0 ? <p class="muted">none</p> : <dl class="facts">{[...deliveries].map(([k, v]) => [<dt>{k}</dt>, <dd>{v}</dd>])}</dl>}
        </article>
      </div>
    </section>
  );
}

function ApiKeys() {
  const { api } = useSession();
  const [keys, setKeys] = useState<ApiKey[]>([]);
  const [created, setCreated] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = () => api.get<{ apiKeys: ApiKey[] }>('/v1/api-keys').then((r) => setKeys(r.apiKeys), setError);
  useEffect(() => void load(), []);
  const create = async (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.target as HTMLFormElement);
    try {
      const k = await api.send<{ key: string }>('POST', '/v1/api-keys', { name: String(form.get('name')), scopes: [String(form.get('scope'))] });
      setCreated(k.key);
      (e.target as HTMLFormElement).reset();
      await load();
    } catch (err) {
      setError(err);
    }
  };
  const revoke = async (id: string) => {
    try {
      await api.send('DELETE', `/v1/api-keys/${enc(id)}`);
      await load();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section aria-labelledby="keys-h">
      <h2 id="keys-h">API keys</h2>
      <ErrorNote error={error} />
      {created && (
        <p role="status" class="notice">
          New key (shown once, copy it now): <code data-testid="new-api-key">{created}</code>
        </p>
      )}
      <form onSubmit={create} aria-label="Create an API key">
        <fieldset role="group">
          <input name="name" aria-label="Key name" placeholder="name" required />
          <select name="scope" aria-label="Scope">
            <option value="a2a:invoke">a2a:invoke</option>
            <option value="admin">admin</option>
          </select>
          <button type="submit">Create key</button>
        </fieldset>
      </form>
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Prefix</th>
              <th scope="col">Scopes</th>
              <th scope="col">Last used</th>
              <th scope="col" />
            </tr>
          </thead>
          <tbody>
            {keys.map((k) => (
              <tr>
                <td>{k.name}</td>
                <td>
                  <code>{k.prefix}</code>
                </td>
                <td>{k.scopes.join(', ')}</td>
                <td>{k.lastUsedAt ? age(k.lastUsedAt) : 'never'}</td>
                <td>
                  {k.revokedAt ? (
                    <small class="muted">revoked {when(k.revokedAt)}</small>
                  ) : (
                    <button type="button" class="secondary outline small" onClick={() => revoke(k.id)}>
                      Revoke
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

function SigningKeys() {
  const { api } = useSession();
  const [keys, setKeys] = useState<SigningKey[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const load = () => api.get<{ signingKeys: SigningKey[] }>('/v1/signing-keys').then((r) => setKeys(r.signingKeys), setError);
  useEffect(() => void load(), []);
  const run = async (f: () => Promise<unknown>) => {
    setBusy(true);
    setError(null);
    try {
      await f();
    } catch (err) {
      setError(err);
    } finally {
      await load();
      setBusy(false);
    }
  };
  /** Rotate: create the new key first (it signs at once), then retire the old one. */
  const rotate = (old: SigningKey) =>
    run(async () => {
      await api.send('POST', '/v1/signing-keys', { alg: old.alg });
      await api.send('POST', `/v1/signing-keys/${enc(old.id)}/retire`);
    });
  return (
    <section aria-labelledby="signing-h">
      <h2 id="signing-h">Agent Card signing keys</h2>
      <ErrorNote error={error} />
      <p>
        <button type="button" disabled={busy} onClick={() => run(() => api.send('POST', '/v1/signing-keys', { alg: 'EdDSA' }))}>
          Create EdDSA key
        </button>{' '}
        <button type="button" class="secondary" disabled={busy} onClick={() => run(() => api.send('POST', '/v1/signing-keys', { alg: 'ES256' }))}>
          Create ES256 key
        </button>
      </p>
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">kid</th>
              <th scope="col">alg</th>
              <th scope="col">Status</th>
              <th scope="col">Created</th>
              <th scope="col" />
            </tr>
          </thead>
          <tbody>
            {keys.map((k) => (
              <tr data-kid={k.kid} data-status={k.status}>
                <td>
                  <code>{k.kid}</code>
                </td>
                <td>{k.alg}</td>
                <td>{k.status}</td>
                <td>{when(k.createdAt)}</td>
                <td>
                  {k.status === 'active' && (
                    <>
                      <button type="button" class="small" disabled={busy} onClick={() => rotate(k)}>
                        Rotate
                      </button>{' '}
                      <button type="button" class="secondary outline small" disabled={busy} onClick={() => run(() => api.send('POST', `/v1/signing-keys/${enc(k.id)}/retire`))}>
                        Retire
                      </button>
                    </>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}
