/**
 * Readable output of the CLI (without `--json`): aligned tables and one-line event summaries.
 * Pure functions of the admin API's response shapes; nothing here talks to the service.
 */

/** Columns padded to their widest cell; `—` for empty cells. */
export function table(headers: string[], rows: Array<Array<string | number | null | undefined>>): string {
  const cells = [headers, ...rows.map((r) => r.map((c) => (c === null || c === undefined || c === '' ? '—' : String(c))))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => [...(r[i] ?? '')].length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n');
}

const RELATIVE = new Intl.RelativeTimeFormat('en', { numeric: 'auto' });
const UNITS: Array<[Intl.RelativeTimeFormatUnit, number]> = [
  ['year', 365 * 86_400_000],
  ['month', 30 * 86_400_000],
  ['week', 7 * 86_400_000],
  ['day', 86_400_000],
  ['hour', 3_600_000],
  ['minute', 60_000],
  ['second', 1_000],
];

/**
 * An ISO timestamp relative to `now` (ms since the epoch) in words — "3 minutes ago", "in 2 hours",
 * "yesterday", "now" — in the largest whole unit, by `Intl.RelativeTimeFormat`; null for no time, the
 * input when it is not a time.
 */
export function ago(iso: string | null | undefined, now = Date.now()): string | null {
  if (!iso) return null;
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  const diff = t - now;
  for (const [unit, ms] of UNITS) {
    if (Math.abs(diff) >= ms || unit === 'second') return RELATIVE.format(Math.trunc(diff / ms), unit);
  }
  return iso;
}

/** A string cut to `max` code points, on one line. */
export function short(s: string, max = 80): string {
  const flat = s.replace(/\s+/g, ' ').trim();
  const cps = [...flat];
  return cps.length > max ? `${cps.slice(0, max - 1).join('')}…` : flat;
}

interface PartLike {
  text?: string;
  raw?: string;
  url?: string;
  data?: unknown;
  filename?: string;
  mediaType?: string;
}

/** Parts in brief: text quoted, the others as `[file name]`, `[url …]`, `[data]`. */
export function partsText(parts: readonly PartLike[] | undefined, max = 80): string {
  if (!parts?.length) return '';
  const bits = parts.map((p) => {
    if (typeof p.text === 'string') return `"${short(p.text, max)}"`;
    if (p.raw !== undefined) return `[file ${p.filename ?? p.mediaType ?? 'bytes'}]`;
    if (p.url !== undefined) return `[url ${p.filename ?? p.url}]`;
    return `[data ${short(JSON.stringify(p.data) ?? '', 40)}]`;
  });
  return bits.join(' ');
}

const blocked = (reason: unknown) => (typeof reason === 'string' && reason ? ` (${reason.replace(/_/g, ' ')})` : '');

/** A run's status in words: `working`, `working (input required)`. */
export function statusText(status: string, blockedReason?: string | null): string {
  return `${status}${blocked(blockedReason)}`;
}

/** The command answering an interaction: `--option <first option>` for a confirmation with options, else `--text '<answer>'`. */
export function answerCommand(runId: string, interactionId: string, options?: ReadonlyArray<{ id: string }>): string {
  const how = options?.length ? `--option ${options[0]!.id}` : "--text '<answer>'";
  return `aaas interactions answer ${runId} ${interactionId} ${how}`;
}

/**
 * One event of a run's log as `#<sequence> <type> <summary>`. With `runId`, an
 * `interaction.requested` line ends with its interaction id and the command answering it.
 */
export function eventLine(e: { sequence: number; event: { type: string; payload: any } }, runId?: string): string {
  const p = e.event.payload ?? {};
  const msg = (m: { role?: string; parts?: PartLike[] } | undefined) => (m?.parts ? partsText(m.parts) : '');
  let summary: string;
  switch (e.event.type) {
    case 'run.created':
      summary = `${p.status ?? ''}`;
      break;
    case 'run.status_changed':
      summary = [statusText(p.status, p.blockedReason), msg(p.message), p.reason ? `— ${short(String(p.reason))}` : ''].filter(Boolean).join(' ');
      break;
    case 'message.added':
      summary = `${p.message?.role ?? '?'}: ${msg(p.message)}`;
      break;
    case 'artifact.updated': {
      const chunk = [p.append ? 'appended' : 'chunk', p.lastChunk ? 'last' : ''].filter(Boolean).join(', ');
      summary = `${p.name ?? p.artifactId} (${chunk}) ${partsText(p.parts)}`;
      break;
    }
    case 'interaction.requested':
      summary = [`${p.kind}${p.blocking === false ? ' (non-blocking)' : ''}`, p.title ? `"${short(String(p.title))}"` : '', msg(p.message), p.options?.length ? `options: ${p.options.map((o: { id: string }) => o.id).join(', ')}` : '']
        .filter(Boolean)
        .join(' ');
      if (typeof p.interactionId === 'string') {
        summary += ` [id ${p.interactionId}]`;
        if (runId !== undefined) summary += ` — answer: ${answerCommand(runId, p.interactionId, p.options)}`;
      }
      break;
    case 'interaction.responded':
      summary = [p.decision, p.optionId ? `option ${p.optionId}` : '', msg(p.message)].filter(Boolean).join(' ');
      break;
    case 'interaction.expired':
      summary = `outcome ${p.outcome}`;
      break;
    case 'interaction.canceled':
      summary = short(String(p.reason ?? ''));
      break;
    case 'run.linked':
      summary = `${p.kind} to ${p.agentSlug ?? p.agentId} (child run ${p.childRunId})`;
      break;
    case 'run.link_updated':
      summary = `child run ${p.childRunId} ${statusText(p.status, p.blockedReason)}`;
      break;
    case 'run.execution_resumed':
      summary = `attempt ${p.attempt}: ${short(String(p.reason ?? ''))}`;
      break;
    case 'run.runtime_state_saved':
      summary = '';
      break;
    default:
      summary = short(JSON.stringify(p) ?? '', 100);
  }
  return `#${e.sequence} ${e.event.type}${summary ? ` ${summary}` : ''}`;
}
