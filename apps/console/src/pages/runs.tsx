import { useEffect, useMemo, useState } from 'preact/hooks';
import { Link, useSearchParams } from 'wouter-preact';
import { BLOCKED_REASONS, RUN_STATUSES, type Agent, type RunSummary } from '../api';
import { ErrorNote, useSession } from '../session-context';
import { age, shortId, statusLabel, when } from '../format';

const PAGE = 50;
const FILTERS = ['agentId', 'status', 'blocked', 'kind', 'statusFrom', 'statusTo', 'q'] as const;

/** datetime-local value (local time, no zone) → ISO 8601 with the zone. */
const toIso = (local: string) => (local ? new Date(local).toISOString() : '');
const toLocal = (iso: string | null) => {
  if (!iso) return '';
  const d = new Date(iso);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};

/**
 * The organization's runs, newest status change first, one page (50) at a time from the server
 * (keyset cursors: the page never loads more than it shows). Filters live in the URL's query.
 */
export function RunsPage() {
  const { api } = useSession();
  const [params, setParams] = useSearchParams();
  const [agents, setAgents] = useState<Agent[]>([]);
  const [page, setPage] = useState<{ runs: RunSummary[]; nextCursor: string | null } | null>(null);
  const [cursors, setCursors] = useState<string[]>([]);
  const [error, setError] = useState<unknown>(null);
  const filterKey = FILTERS.map((f) => params.get(f) ?? '').join('|');
  const cursor = cursors.at(-1);

  useEffect(() => {
    api.get<{ agents: Agent[] }>('/v1/agents').then((r) => setAgents(r.agents), setError);
  }, []);
  useEffect(() => setCursors([]), [filterKey]);
  useEffect(() => {
    setPage(null);
    setError(null);
    const query: Record<string, string | number | undefined> = { limit: PAGE, cursor };
    for (const f of FILTERS) query[f] = params.get(f) ?? undefined;
    api.get<{ runs: RunSummary[]; nextCursor: string | null }>('/v1/runs', query).then(setPage, setError);
  }, [filterKey, cursor]);

  const agentSlug = useMemo(() => new Map(agents.map((a) => [a.id, a.slug])), [agents]);
  const set = (name: string, value: string) =>
    setParams((p) => {
      const next = new URLSearchParams(p);
      if (value) next.set(name, value);
      else next.delete(name);
      return next;
    });
  const onSearch = (e: Event) => {
    e.preventDefault();
    set('q', String(new FormData(e.target as HTMLFormElement).get('q') ?? '').trim());
  };

  return (
    <main class="container">
      <h1>Runs</h1>
      <form class="filters" aria-label="Filter runs" onSubmit={onSearch}>
        <label>
          Agent
          <select name="agentId" value={params.get('agentId') ?? ''} onChange={(e) => set('agentId', (e.target as HTMLSelectElement).value)}>
            <option value="">any agent</option>
            {agents.map((a) => (
              <option value={a.id}>{a.slug}</option>
            ))}
          </select>
        </label>
        <label>
          Status
          <select name="status" value={params.get('status') ?? ''} onChange={(e) => set('status', (e.target as HTMLSelectElement).value)}>
            <option value="">any status</option>
            <option value="failed,rejected">failed or rejected</option>
            {RUN_STATUSES.map((s) => (
              <option value={s}>{s.replace('_', ' ')}</option>
            ))}
          </select>
        </label>
        <label>
          Blocked
          <select name="blocked" value={params.get('blocked') ?? ''} onChange={(e) => set('blocked', (e.target as HTMLSelectElement).value)}>
            <option value="">either</option>
            <option value="none">not blocked</option>
            {BLOCKED_REASONS.map((b) => (
              <option value={b}>{b.replace('_', ' ')}</option>
            ))}
          </select>
        </label>
        <label>
          Kind
          <select name="kind" value={params.get('kind') ?? ''} onChange={(e) => set('kind', (e.target as HTMLSelectElement).value)}>
            <option value="">tasks and replies</option>
            <option value="execution">tasks (executions)</option>
            <option value="reply">direct replies</option>
          </select>
        </label>
        <label>
          Changed from
          <input type="datetime-local" name="statusFrom" value={toLocal(params.get('statusFrom'))} onChange={(e) => set('statusFrom', toIso((e.target as HTMLInputElement).value))} />
        </label>
        <label>
          Changed until
          <input type="datetime-local" name="statusTo" value={toLocal(params.get('statusTo'))} onChange={(e) => set('statusTo', toIso((e.target as HTMLInputElement).value))} />
        </label>
        <label>
          Text in messages
          <input type="search" name="q" placeholder={params.get('agentId') ? 'search messages' : 'pick an agent to search'} defaultValue={params.get('q') ?? ''} />
        </label>
      </form>
      <ErrorNote error={error} />
      <div class="table-wrap" aria-busy={page === null && !error}>
        <table class="striped runs-table">
          <thead>
            <tr>
              <th scope="col">Run</th>
              <th scope="col">Agent</th>
              <th scope="col">State</th>
              <th scope="col">Status changed</th>
              <th scope="col">Created</th>
              <th scope="col">Events</th>
            </tr>
          </thead>
          <tbody>
            {page?.runs.map((r) => (
              <tr data-run-id={r.id}>
                <td>
                  <Link href={`/runs/${r.id}`}>
                    <code>{shortId(r.id)}</code>
                  </Link>
                </td>
                <td>{agentSlug.get(r.agentId) ?? shortId(r.agentId)}</td>
                <td>
                  <span class={`badge status-${r.status}`}>{statusLabel(r.status, r.blockedReason)}</span>
                  {r.kind === 'reply' && (
                    <span class="badge kind-reply" title="A direct reply: the agent answered with a Message, no task was created">
                      reply
                    </span>
                  )}
                </td>
                <td title={when(r.statusAt)}>{age(r.statusAt)}</td>
                <td title={when(r.createdAt)}>{age(r.createdAt)}</td>
                <td>{r.lastSequence}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {page && page.runs.length === 0 && <p>No runs match.</p>}
      </div>
      <nav aria-label="Pages" class="pager">
        <button type="button" class="secondary" disabled={cursors.length === 0} onClick={() => setCursors((c) => c.slice(0, -1))}>
          Newer
        </button>
        <span>Page {cursors.length + 1}</span>
        <button type="button" class="secondary" disabled={!page?.nextCursor} onClick={() => page?.nextCursor && setCursors((c) => [...c, page.nextCursor!])}>
          Older
        </button>
      </nav>
    </main>
  );
}
