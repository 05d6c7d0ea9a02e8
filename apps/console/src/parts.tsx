import type { Message, Part } from './api';

/** Whether a URL may be a link target: http(s) only (no javascript:, data: …). */
export function safeHref(url: string): string | null {
  try {
    const u = new URL(url, location.origin);
    return u.protocol === 'https:' || u.protocol === 'http:' ? u.href : null;
  } catch {
    return null;
  }
}

/** One Part: text as text, data as JSON, files as links (URL) or a note (inline bytes). All escaped by Preact. */
export function PartView(props: { part: Part }) {
  const p = props.part;
  if (typeof p.text === 'string') return <p class="part-text">{p.text}</p>;
  if (p.data !== undefined) return <pre class="part-data">{JSON.stringify(p.data, null, 2)}</pre>;
  if (typeof p.url === 'string') {
    const href = safeHref(p.url);
    const label = p.filename ?? p.url;
    return href ? (
      <p>
        <a href={href} target="_blank" rel="noopener noreferrer nofollow">
          {label}
        </a>{' '}
        {p.mediaType && <small class="muted">{p.mediaType}</small>}
      </p>
    ) : (
      <p>
        {label} <small class="muted">(link not shown: not http/https)</small>
      </p>
    );
  }
  if (typeof p.raw === 'string') return <p>{p.filename ?? 'file'} <small class="muted">({p.mediaType ?? 'bytes'}, {Math.floor((p.raw.length * 3) / 4)} bytes inline)</small></p>;
  return <pre class="part-data">{JSON.stringify(p)}</pre>;
}

export function MessageView(props: { message: Message }) {
  return (
    <article class={`message role-${props.message.role}`}>
      <header>
        <small>{props.message.role}</small>
      </header>
      {props.message.parts.map((p) => (
        <PartView part={p} />
      ))}
    </article>
  );
}
