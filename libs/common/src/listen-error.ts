/**
 * One line for a server that could not listen, naming the port and how to choose another, or null
 * when `e` is not a listen failure. `port` and `host` are what was asked for; `setting` is the
 * environment variable that chooses the port (e.g. `PORT`, `WORKER_METRICS_PORT`).
 * Recognises Node's `EADDRINUSE` (another process listens there) and `EACCES` (a privileged port).
 */
export function listenFailure(e: unknown, port: number, host: string, setting: string): string | null {
  const code = (e as { code?: unknown } | null)?.code;
  const where = `port ${port}${host && host !== '0.0.0.0' && host !== '::' ? ` on ${host}` : ''}`;
  if (code === 'EADDRINUSE') return `${where} is already in use by another process: stop it, or choose another port with ${setting}=<port>`;
  if (code === 'EACCES') return `${where} needs privileges this process does not have: choose a port above 1023 with ${setting}=<port>`;
  return null;
}
