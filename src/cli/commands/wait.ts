import type { NodeView } from '../../../projections/index.ts';
import { ConvergeError, errorCodes } from '../../core/errors.ts';
import type { ErrorCode } from '../../core/errors.ts';
import type { Context, Run } from '../command.ts';
import { nodeArgument } from '../command.ts';
import { parseDuration } from '../duration.ts';
import { printJson } from '../output.ts';

// `converge wait <node>` (docs/cli.md#converge-wait), kubectl wait's habit over the API's long poll
// (GET /v1/nodes/:node/await). It waits on a digest, never on a time: the one given, or the latest
// sent when it starts, read once, so a send that lands while it waits cannot be taken for the one
// it waits on, and a report of an older declaration can never end it.

/** Exit statuses beyond the CLI's 0/1/2 (docs/cli.md#converge-wait). */
export const waitExit = { reached: 0, timeout: 3, notConverged: 4, notFound: 5 } as const;

const targets = ['converged', 'caught-up'] as const;
type Target = (typeof targets)[number];
type Outcome = 'reached' | 'timeout' | 'refused' | 'degraded' | 'not-found';

// An await stays under the API's cap (300,000 ms) and under undici's default 300 s wait for an
// answer's headers; a longer --timeout is several awaits on the same digest.
const awaitChunkMs = 240_000;

type Api = Readonly<{ get: (path: string, signal?: AbortSignal) => Promise<{ status: number; body: unknown }> }>;

function apiOf(ctx: Context): Api {
  const base = ctx.config.server.replace(/\/+$/, '');
  const headers: Record<string, string> = { accept: 'application/json' };
  if (ctx.config.token !== null) headers.authorization = `Bearer ${ctx.config.token}`;
  return {
    async get(path, signal) {
      let res: Response;
      try {
        res = await fetch(`${base}${path}`, { headers, ...(signal === undefined ? {} : { signal }) });
      } catch (e) {
        if (signal?.aborted) throw e;
        const why = (e as Error & { cause?: Error }).cause?.message ?? (e as Error).message;
        throw new ConvergeError('CONVERGE_ERR_API_UNAVAILABLE', `cannot reach ${base}: ${why} (set --server or CONVERGE_SERVER)`);
      }
      const text = await res.text();
      try {
        return { status: res.status, body: JSON.parse(text) as unknown };
      } catch {
        throw new ConvergeError('CONVERGE_ERR_API_UNAVAILABLE', `${base}${path} answered ${res.status} with something that is not JSON`);
      }
    },
  };
}

/** An answer the wait has no outcome for: the server's problem, as the CLI's one-line failure (exit 1). */
function failure(status: number, body: unknown): ConvergeError {
  const p = body as { code?: string; detail?: string };
  const code = typeof p.code === 'string' && p.code in errorCodes ? (p.code as ErrorCode) : 'CONVERGE_ERR_API_UNAVAILABLE';
  return new ConvergeError(code, `the API answered ${status}: ${p.detail ?? JSON.stringify(body)}`);
}

function options(ctx: Context): { node: string; target: Target; timeoutMs: number; digest: string | undefined } {
  const { values, positionals } = ctx;
  const node = nodeArgument(positionals[0]!);
  const target = (values.for ?? 'converged') as Target;
  if (!targets.includes(target)) {
    throw new ConvergeError('CONVERGE_ERR_USAGE', `--for must be one of ${targets.join(', ')}, got ${JSON.stringify(values.for)}`);
  }
  const timeoutMs = parseDuration('timeout', typeof values.timeout === 'string' ? values.timeout : '5m');
  const digest = typeof values.digest === 'string' ? values.digest : undefined;
  if (digest !== undefined && !/^[0-9a-f]{64}$/.test(digest)) {
    throw new ConvergeError('CONVERGE_ERR_USAGE', `--digest must be 64 lowercase hex characters, got ${JSON.stringify(digest)}`);
  }
  return { node, target, timeoutMs, digest };
}

/** The node's state now, or null for a node the API does not know. */
async function current(api: Api, node: string): Promise<NodeView | null> {
  const r = await api.get(`/v1/nodes/${encodeURIComponent(node)}`);
  if (r.status === 404) return null;
  if (r.status !== 200) throw failure(r.status, r.body);
  return r.body as NodeView;
}

/** Await the digest until the deadline: the state once caught up with it, null at the deadline, 'not-found' for a 404. */
async function awaitDigest(
  api: Api,
  node: string,
  digest: string,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<NodeView | null | 'not-found'> {
  // performance.now() is monotonic: a clock step while waiting moves no deadline.
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const left = Math.max(0, Math.ceil(deadline - performance.now()));
    const chunk = Math.min(left, awaitChunkMs);
    const r = await api.get(`/v1/nodes/${encodeURIComponent(node)}/await?digest=${digest}&timeoutMs=${chunk}`, signal);
    if (r.status === 200) return r.body as NodeView;
    if (r.status === 404) return 'not-found';
    if (r.status !== 408) throw failure(r.status, r.body);
    if (left <= chunk) return null;
  }
}

const converged = (v: NodeView | null) => v?.conditions.find((c) => c.type === 'Converged');

function sayWhy(node: string, digest: string, outcome: Outcome, v: NodeView | null, timeoutMs: number): string {
  const d = digest.slice(0, 12);
  const c = converged(v);
  const why = c === undefined ? '' : `: ${c.reason}: ${c.message}`;
  switch (outcome) {
    case 'reached':
      return `node ${node} ${v?.status === 'converged' ? 'converged' : 'caught up'} with ${d} (serial ${v?.sent?.serial})`;
    case 'timeout': {
      const superseded =
        v?.sent !== null && v?.sent !== undefined && v.sent.digest !== digest ? `; superseded by serial ${v.sent.serial}` : '';
      return `node ${node} did not reach ${d} within ${timeoutMs} ms${superseded}${why}`;
    }
    case 'refused':
    case 'degraded':
      return `node ${node} is ${outcome} on ${d}${why}`;
    case 'not-found':
      return v === null ? `node ${node} is not known to the API` : `node ${node} has been sent nothing to wait for`;
  }
}

const exitOf: Readonly<Record<Outcome, number>> = {
  reached: waitExit.reached,
  timeout: waitExit.timeout,
  refused: waitExit.notConverged,
  degraded: waitExit.notConverged,
  'not-found': waitExit.notFound,
};

export const run: Run = async (ctx) => {
  const { io } = ctx;
  const { node, target, timeoutMs, digest: given } = options(ctx);
  const api = apiOf(ctx);
  const abort = new AbortController();
  void io.interrupted.then(() => abort.abort());

  let digest = given;
  let outcome: Outcome;
  let state: NodeView | null = null;
  if (digest === undefined) {
    state = await current(api, node);
    digest = state?.sent?.digest;
  }
  if (digest === undefined) outcome = 'not-found';
  else {
    let r: Awaited<ReturnType<typeof awaitDigest>>;
    try {
      r = await awaitDigest(api, node, digest, timeoutMs, abort.signal);
    } catch (e) {
      if (!abort.signal.aborted) throw e;
      io.stderr(`converge: interrupted while waiting for node ${node}\n`);
      return 130;
    }
    if (r === 'not-found') outcome = 'not-found';
    else if (r === null) {
      outcome = 'timeout';
      // What the node did do, for the reason: best effort, the outcome is decided.
      state = await current(api, node).catch(() => null);
    } else {
      state = r;
      outcome = target === 'caught-up' || r.status === 'converged' ? 'reached' : r.status === 'refused' ? 'refused' : 'degraded';
    }
  }
  const line = sayWhy(node, digest ?? '', outcome, state, timeoutMs);
  if (ctx.json) printJson(io, { node, digest: digest ?? null, for: target, outcome, state });
  else if (outcome === 'reached') io.stdout(`${line}\n`);
  if (outcome !== 'reached') io.stderr(`converge: ${line}\n`);
  return exitOf[outcome];
};
