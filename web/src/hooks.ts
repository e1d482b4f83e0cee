import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import type { ApiError } from './api/client.ts';
import { followEvents } from './api/stream.ts';
import type { StreamStatus } from './api/stream.ts';
import type { NodeView, Rollout } from './api/types.ts';
import { onTokenChange } from './auth.ts';

export type Loaded<T> = Readonly<{ data: T | null; error: ApiError | Error | null; loading: boolean; reload: () => void }>;

/**
 * Load with `fetcher` whenever `key` changes (or the token does); the newest request wins, older
 * ones are aborted. The data of the previous key stays on screen until the new one arrives, so a
 * dragged slider does not flicker.
 */
export function useLoad<T>(key: string | null, fetcher: (signal: AbortSignal) => Promise<T>): Loaded<T> {
  const [state, setState] = useState<{ data: T | null; error: ApiError | Error | null; loading: boolean }>({
    data: null,
    error: null,
    loading: key !== null,
  });
  const [nonce, setNonce] = useState(0);
  const fetchRef = useRef(fetcher);
  fetchRef.current = fetcher;
  useEffect(() => onTokenChange(() => setNonce((n) => n + 1)), []);
  useEffect(() => {
    if (key === null) return undefined;
    const c = new AbortController();
    setState((s) => ({ ...s, loading: true }));
    fetchRef.current(c.signal).then(
      (data) => !c.signal.aborted && setState({ data, error: null, loading: false }),
      (error: unknown) =>
        !c.signal.aborted &&
        setState((s) => ({ data: s.data, error: error instanceof Error ? error : new Error(String(error)), loading: false })),
    );
    return () => c.abort();
  }, [key, nonce]);
  const reload = useCallback(() => setNonce((n) => n + 1), []);
  return { ...state, reload };
}

/** Follow /v1/events (optionally one node's); restarts when the token changes. */
export function useEvents(node: string | undefined, onNode: (v: NodeView, position: string) => void): StreamStatus {
  const [status, setStatus] = useState<StreamStatus>({ state: 'connecting', since: Date.now(), resumedAfterMs: null, reason: null });
  const handler = useRef(onNode);
  handler.current = onNode;
  const [nonce, setNonce] = useState(0);
  useEffect(() => onTokenChange(() => setNonce((n) => n + 1)), []);
  useEffect(
    () =>
      followEvents({
        ...(node === undefined ? {} : { node }),
        onNode: (v, p) => handler.current(v, p),
        onStatus: setStatus,
      }),
    [node, nonce],
  );
  return status;
}

/** Follow rollout changes on /v1/events (one rollout's, or every rollout's and every node's). */
export function useRolloutEvents(rollout: string | undefined, onRollout: (r: Rollout, position: string) => void): StreamStatus {
  const [status, setStatus] = useState<StreamStatus>({ state: 'connecting', since: Date.now(), resumedAfterMs: null, reason: null });
  const handler = useRef(onRollout);
  handler.current = onRollout;
  const [nonce, setNonce] = useState(0);
  useEffect(() => onTokenChange(() => setNonce((n) => n + 1)), []);
  useEffect(
    () =>
      followEvents({
        ...(rollout === undefined ? {} : { rollout }),
        onNode: () => {},
        onRollout: (r, p) => handler.current(r, p),
        onStatus: setStatus,
      }),
    [rollout, nonce],
  );
  return status;
}

/** Call `f` at most once per `ms` while `pending` things keep arriving (a burst of SSE events → one refetch). */
export function useThrottle(f: () => void, ms: number): () => void {
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const last = useRef(0);
  const fn = useRef(f);
  fn.current = f;
  useEffect(() => () => void (timer.current !== null && clearTimeout(timer.current)), []);
  return useCallback(() => {
    if (timer.current !== null) return;
    const wait = Math.max(0, last.current + ms - Date.now());
    timer.current = setTimeout(() => {
      timer.current = null;
      last.current = Date.now();
      fn.current();
    }, wait);
  }, [ms]);
}

/** Re-render every `ms` (for "disconnected for …" and "resumed … ago"). */
export function useNow(ms: number): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(t);
  }, [ms]);
  return now;
}
