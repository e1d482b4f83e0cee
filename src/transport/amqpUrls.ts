// The broker's address as operators give it (docs/design.md §7): one AMQP URL, or the
// nodes of a cluster as several URLs separated by commas, in `--amqp` / CONVERGE_AMQP_URL.
// A comma inside a URL (in a password) must be written %2C, as any reserved character in a
// URL's user info.

/** The URLs of a list, trimmed, empty entries dropped; a list already split is taken as is. */
export function splitAmqpUrls(list: string | readonly string[]): string[] {
  const parts = typeof list === 'string' ? list.split(',') : list;
  return parts.map((u) => u.trim()).filter((u) => u !== '');
}

/** Why `url` cannot be used as a broker address, or null if it can. */
export function amqpUrlProblem(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return `${JSON.stringify(redactUrl(url))} is not a URL`;
  }
  if (u.protocol !== 'amqp:' && u.protocol !== 'amqps:') return `${JSON.stringify(redactUrl(url))} is not an amqp:// or amqps:// URL`;
  if (u.hostname === '') return `${JSON.stringify(redactUrl(url))} names no host`;
  return null;
}

/** Every problem of a list (an empty list is one), one line each, for the config's report. */
export function amqpUrlListProblems(list: string | readonly string[]): string[] {
  const urls = splitAmqpUrls(list);
  if (urls.length === 0) return ['names no URL'];
  return urls.map(amqpUrlProblem).filter((p): p is string => p !== null);
}

/** Set heartbeat in the URL unless the caller chose one there (amqplib reads it from the query). */
export function withHeartbeat(url: string, seconds: number): string {
  const u = new URL(url);
  if (!u.searchParams.has('heartbeat')) u.searchParams.set('heartbeat', String(seconds));
  return u.toString();
}

/** The URL with its password hidden, for logs and errors (never log secrets). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    // Not a URL: still hide what looks like user:password@.
    return url.replace(/\/\/[^@/]*@/, '//***@');
  }
}
