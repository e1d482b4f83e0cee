import { ConvergeError } from '../core/errors.ts';

// A thin client for the RabbitMQ management HTTP API (rabbitmq_management plugin), only the
// calls node accounts need. Node 20's fetch, no dependency: five JSON requests do not justify one.

export type ManagementOptions = Readonly<{
  /** e.g. `http://127.0.0.1:15672`; credentials in the URL are accepted and moved to a header. */
  managementUrl: string;
  /** Administrator user; defaults to the URL's user, then `guest`. */
  username?: string;
  password?: string;
  /** Per request; default 10 s. */
  timeoutMs?: number;
}>;

export type ManagementResponse = Readonly<{ status: number; body: unknown }>;

export type ManagementClient = Readonly<{
  /** The base URL without credentials (safe to log). */
  baseUrl: string;
  request: (
    method: 'GET' | 'PUT' | 'POST' | 'DELETE',
    path: string,
    body?: unknown,
    headers?: Readonly<Record<string, string>>,
  ) => Promise<ManagementResponse>;
}>;

/** Percent-encode one path segment: `/` (the default vhost) must become `%2F`. */
export const seg = (s: string): string => encodeURIComponent(s);

export function createManagementClient(options: ManagementOptions): ManagementClient {
  let url: URL;
  try {
    url = new URL(options.managementUrl);
  } catch (cause) {
    throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', 'management URL is not a URL', { cause });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', `management URL must be http(s), got ${url.protocol}`);
  }
  const username = options.username ?? (url.username ? decodeURIComponent(url.username) : 'guest');
  const password = options.password ?? (url.password ? decodeURIComponent(url.password) : 'guest');
  // fetch refuses URLs with credentials, and the base URL is what errors and logs may show.
  url.username = '';
  url.password = '';
  const baseUrl = url.toString().replace(/\/+$/, '');
  const authorization = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  const timeoutMs = options.timeoutMs ?? 10_000;

  return {
    baseUrl,
    async request(method, path, body, headers) {
      const send = (): Promise<Response> =>
        fetch(`${baseUrl}/api${path}`, {
          method,
          headers: { ...headers, authorization, 'content-type': 'application/json', accept: 'application/json' },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          signal: AbortSignal.timeout(timeoutMs),
        });
      let res: Response;
      try {
        // A kept-alive connection the broker closed while this process was busy fails at the
        // socket before any answer; every management call is idempotent, so try once more.
        res = await send().catch((e: unknown) => (droppedConnection(e) ? send() : Promise.reject(e)));
      } catch (cause) {
        throw new ConvergeError(
          'CONVERGE_ERR_BROKER_ADMIN',
          `management API at ${baseUrl} cannot be reached: ${(cause as Error).message}`,
          {
            cause,
            details: { method, path },
          },
        );
      }
      const text = await res.text();
      let parsed: unknown = null;
      if (text.length > 0) {
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = text;
        }
      }
      return { status: res.status, body: parsed };
    },
  };
}

/** fetch's failure when the connection broke before an answer (not a timeout, not a refusal). */
function droppedConnection(e: unknown): boolean {
  const code = ((e as { cause?: { code?: unknown } }).cause?.code ?? '') as string;
  return ['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET'].includes(code);
}

/**
 * Turn an unexpected management response into an error. The message names the request and the
 * broker's reason, never the request body (which may carry a password).
 */
export function adminError(method: string, path: string, res: ManagementResponse): ConvergeError {
  const reason =
    typeof res.body === 'object' && res.body !== null && 'reason' in res.body
      ? String((res.body as { reason: unknown }).reason)
      : `HTTP ${res.status}`;
  const hint =
    res.status === 401
      ? ' (the admin credentials were refused)'
      : res.status === 403
        ? ' (the admin user lacks the administrator tag)'
        : '';
  return new ConvergeError('CONVERGE_ERR_BROKER_ADMIN', `management API ${method} ${path} failed: ${reason}${hint}`, {
    details: { method, path, status: res.status },
  });
}
