import { reportUnauthorized } from '../auth.ts';
import { authHeaders } from './client.ts';
import type { NodeView, Rollout } from './types.ts';

// GET /v1/events read with fetch rather than EventSource: EventSource cannot send an
// Authorization header, and the token must never go in a URL. The parser follows the
// SSE format (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
// `field: value` lines, `:` comments, a blank line dispatches. On a drop it reconnects with
// Last-Event-ID, and the API replays the current state of every node that changed meanwhile.

export type StreamStatus = Readonly<{
  state: 'connecting' | 'live' | 'disconnected';
  /** When the stream entered this state (ms since epoch). */
  since: number;
  /** When live again after a drop: how long it was down. */
  resumedAfterMs: number | null;
  /** Why it is disconnected, for people. */
  reason: string | null;
}>;

export type FollowOptions = Readonly<{
  node?: string;
  /** Only this rollout's changes (and no node's unless `node` is given too). */
  rollout?: string;
  onNode: (view: NodeView, position: string) => void;
  /** `event: rollout`: a rollout changed. */
  onRollout?: (rollout: Rollout, position: string) => void;
  onStatus: (status: StreamStatus) => void;
  /** Silence longer than this (the API pings every 15 s) counts as a dead connection. */
  idleMs?: number;
}>;

export function followEvents({ node, rollout, onNode, onRollout, onStatus, idleMs = 45_000 }: FollowOptions): () => void {
  const query = new URLSearchParams();
  if (node !== undefined) query.set('node', node);
  if (rollout !== undefined) query.set('rollout', rollout);
  const path = `/v1/events${query.size === 0 ? '' : `?${query.toString()}`}`;
  let stopped = false;
  let lastId: string | null = null;
  let retryMs = 2_000;
  let downSince: number | null = null;
  let controller: AbortController | null = null;
  let timer: ReturnType<typeof setTimeout> | null = null;

  const status = (s: Omit<StreamStatus, 'since'>): void => onStatus({ ...s, since: Date.now() });

  async function connect(): Promise<void> {
    controller = new AbortController();
    const c = controller;
    let idle: ReturnType<typeof setTimeout> | null = null;
    const touch = (): void => {
      if (idle !== null) clearTimeout(idle);
      idle = setTimeout(() => c.abort(new Error('no data or ping for a while')), idleMs);
    };
    try {
      if (downSince === null) status({ state: 'connecting', resumedAfterMs: null, reason: null });
      touch();
      const res = await fetch(path, {
        headers: { accept: 'text/event-stream', ...authHeaders(), ...(lastId === null ? {} : { 'last-event-id': lastId }) },
        cache: 'no-store',
        credentials: 'omit',
        signal: c.signal,
      });
      if (res.status === 401) reportUnauthorized('the event stream needs a bearer token');
      if (!res.ok || res.body === null) {
        throw new Error(res.status === 401 ? 'the API needs a bearer token' : `the API answered ${res.status}`);
      }
      status({ state: 'live', resumedAfterMs: downSince === null ? null : Date.now() - downSince, reason: null });
      downSince = null;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      let data: string[] = [];
      let event = 'message';
      let id: string | null = null;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        touch();
        buffer += value;
        let nl: number;
        while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + (buffer.startsWith('\r\n', nl) ? 2 : 1));
          if (line === '') {
            if (data.length > 0 && id !== null && (event === 'node' || event === 'rollout')) {
              lastId = id;
              if (event === 'node') onNode(JSON.parse(data.join('\n')) as NodeView, id);
              else onRollout?.(JSON.parse(data.join('\n')) as Rollout, id);
            }
            data = [];
            event = 'message';
            continue;
          }
          if (line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const raw = colon < 0 ? '' : line.slice(colon + 1);
          const v = raw.startsWith(' ') ? raw.slice(1) : raw;
          if (field === 'data') data.push(v);
          else if (field === 'event') event = v;
          else if (field === 'id') id = v;
          else if (field === 'retry' && /^\d+$/.test(v)) retryMs = Number(v);
        }
      }
      throw new Error('the API closed the stream');
    } catch (err) {
      if (stopped) return;
      downSince ??= Date.now();
      status({ state: 'disconnected', resumedAfterMs: null, reason: err instanceof Error ? err.message : String(err) });
      timer = setTimeout(() => void connect(), retryMs);
    } finally {
      if (idle !== null) clearTimeout(idle);
    }
  }

  void connect();
  return () => {
    stopped = true;
    if (timer !== null) clearTimeout(timer);
    controller?.abort();
  };
}
