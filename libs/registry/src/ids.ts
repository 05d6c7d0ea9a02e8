const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Ids are UUIDs; anything else names nothing (and must never reach a uuid cast in SQL). */
export function isUuid(s: string): boolean {
  return UUID_RE.test(s);
}
