import { getToken, reportUnauthorized } from '../auth.ts';
import type {
  DeclarationAccepted,
  Fleet,
  Health,
  NodeList,
  NodeStatus,
  LivenessState,
  NodeOutcome,
  Rollout,
  RolloutList,
  RolloutNodes,
  RolloutStatus,
  NodeView,
  Problem,
  StateAt,
  Timeline,
} from './types.ts';

// The /v1 API, typed. Every request carries the session's bearer token in its header (if any);
// a problem+json answer becomes an ApiError with the API's stable code.

export class ApiError extends Error {
  readonly status: number;
  readonly problem: Problem | null;
  constructor(status: number, problem: Problem | null, message: string) {
    super(message);
    this.status = status;
    this.problem = problem;
  }
  get needsToken(): boolean {
    return this.status === 401;
  }
}

export function authHeaders(): Record<string, string> {
  const token = getToken();
  return token === null ? {} : { authorization: `Bearer ${token}` };
}

async function request<T>(path: string, init: RequestInit = {}, signal?: AbortSignal): Promise<T> {
  const res = await fetch(path, {
    ...init,
    headers: { accept: 'application/json', ...authHeaders(), ...(init.headers as Record<string, string> | undefined) },
    cache: 'no-store',
    credentials: 'omit',
    ...(signal === undefined ? {} : { signal }),
  });
  const text = await res.text();
  const body: unknown = text === '' ? null : JSON.parse(text);
  if (!res.ok) {
    const problem = body !== null && typeof body === 'object' && 'code' in body ? (body as Problem) : null;
    if (res.status === 401) reportUnauthorized(problem?.detail ?? 'the API needs a bearer token');
    throw new ApiError(res.status, problem, problem?.detail ?? `${res.status} ${res.statusText}`);
  }
  return body as T;
}

const qs = (params: Record<string, string | number | undefined | null>): string => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
};
const nodePath = (node: string): string => `/v1/nodes/${encodeURIComponent(node)}`;

export type NodeFilter = Readonly<{
  status?: NodeStatus | undefined;
  liveness?: LivenessState | undefined;
  spec?: string | undefined;
  digest?: string | undefined;
  prefix?: string | undefined;
}>;

/** A file the API answers, with the name its Content-Disposition gives (an evidence bundle). */
async function download(path: string, fallback: string): Promise<{ blob: Blob; name: string }> {
  const res = await fetch(path, { headers: { accept: 'application/json', ...authHeaders() }, cache: 'no-store', credentials: 'omit' });
  if (!res.ok) {
    const text = await res.text();
    const problem = text !== '' && res.headers.get('content-type')?.includes('json') ? (JSON.parse(text) as Problem) : null;
    if (res.status === 401) reportUnauthorized(problem?.detail ?? 'the API needs a bearer token');
    throw new ApiError(res.status, problem, problem?.detail ?? `${res.status} ${res.statusText}`);
  }
  const name = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1] ?? fallback;
  return { blob: await res.blob(), name };
}

export const api = {
  health: (signal?: AbortSignal) => request<Health>('/healthz', {}, signal),
  fleet: (at: string | null, signal?: AbortSignal) => request<Fleet>(`/v1/fleet${qs({ at })}`, {}, signal),
  nodes: (filter: NodeFilter, page: { limit: number; after: string | null }, signal?: AbortSignal) =>
    request<NodeList>(`/v1/nodes${qs({ ...filter, limit: page.limit, after: page.after })}`, {}, signal),
  node: (node: string, signal?: AbortSignal) => request<NodeView>(nodePath(node), {}, signal),
  stateAt: (node: string, at: string, signal?: AbortSignal) => request<StateAt>(`${nodePath(node)}/state${qs({ at })}`, {}, signal),
  /** docs/api.md#evidence-bundles: the node's evidence bundle as of `at`, to save and check offline. */
  evidence: (node: string, at: string, unsigned: boolean) =>
    download(`${nodePath(node)}/evidence${qs({ at, unsigned: unsigned ? 'true' : null })}`, `evidence-${node}.json`),
  timeline: (node: string, before: string | null, limit: number, signal?: AbortSignal) =>
    request<Timeline>(`${nodePath(node)}/timeline${qs({ before, limit })}`, {}, signal),
  send: (node: string, spec: unknown) =>
    request<DeclarationAccepted>(`${nodePath(node)}/declarations`, {
      method: 'POST',
      body: JSON.stringify(spec),
      headers: { 'content-type': 'application/json' },
    }),
  rollouts: (status: RolloutStatus | null, signal?: AbortSignal) => request<RolloutList>(`/v1/rollouts${qs({ status })}`, {}, signal),
  rollout: (id: string, signal?: AbortSignal) => request<Rollout>(`/v1/rollouts/${encodeURIComponent(id)}`, {}, signal),
  rolloutNodes: (
    id: string,
    q: { wave: number | null; outcome: NodeOutcome | null; after: number | null; limit: number },
    signal?: AbortSignal,
  ) => request<RolloutNodes>(`/v1/rollouts/${encodeURIComponent(id)}/nodes${qs(q)}`, {}, signal),
  rolloutCommand: (id: string, action: 'pause' | 'resume' | 'abort' | 'rollback', reason: string) =>
    request<Rollout>(`/v1/rollouts/${encodeURIComponent(id)}/${action}`, {
      method: 'POST',
      body: JSON.stringify(reason === '' ? {} : { reason }),
      headers: { 'content-type': 'application/json' },
    }),
  await: (node: string, digest: string, timeoutMs: number, signal?: AbortSignal) =>
    request<NodeView>(`${nodePath(node)}/await${qs({ digest, timeoutMs })}`, {}, signal),
};
