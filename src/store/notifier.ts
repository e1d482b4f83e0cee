// Wakes live subscriptions when this process appends. A version counter, not a bare promise,
// so a wake-up that lands between "read found nothing" and "start waiting" is never lost.

export type Notifier = Readonly<{
  version: () => number;
  notify: () => void;
  /** Resolves when notify() has been called since `seen`, after `ms`, or when `signal` aborts. */
  wait: (seen: number, ms: number, signal: AbortSignal) => Promise<void>;
}>;

export function createNotifier(): Notifier {
  let version = 0;
  const waiters = new Set<() => void>();
  return {
    version: () => version,
    notify: () => {
      version++;
      for (const w of [...waiters]) w();
    },
    wait: (seen, ms, signal) =>
      new Promise<void>((resolve) => {
        if (version !== seen || signal.aborted) return resolve();
        const done = (): void => {
          clearTimeout(timer);
          waiters.delete(done);
          signal.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        waiters.add(done);
        signal.addEventListener('abort', done, { once: true });
      }),
  };
}
