import type pg from 'pg';
import type { ClientConfig } from 'pg';
import { createBackoff, sleep } from '../../retry.ts';
import type { BackoffOptions } from '../../retry.ts';
import type { Notifier } from '../notifier.ts';

// LISTEN on a dedicated connection and turn every NOTIFY from an append (the trigger in
// ./schema.ts) into a wake-up of this store's subscriptions, whichever process appended. It
// carries no data: a woken subscription reads the log after its position, so a lost or merged
// notification costs at most the safety poll, never an event. After a (re)connect it wakes
// everyone once, since notifications sent while it was away are gone.

export type Wakeups = Readonly<{ stop: () => Promise<void> }>;

export function listenForAppends(
  Client: typeof pg.Client,
  config: ClientConfig,
  channel: string,
  notifier: Notifier,
  onError: (err: unknown) => void,
  backoffOptions: BackoffOptions = { minMs: 50, maxMs: 5_000, jitter: 0.5 },
): Wakeups {
  const abort = new AbortController();
  const stopped = new Promise<void>((resolve) => abort.signal.addEventListener('abort', () => resolve(), { once: true }));
  let client: pg.Client | null = null;

  async function run(): Promise<void> {
    const backoff = createBackoff(backoffOptions);
    while (!abort.signal.aborted) {
      const c = new Client(config);
      // `on`, not `once`: a dying connection can emit several errors, and any without a listener ends the process.
      const lost = new Promise<unknown>((resolve) => {
        c.on('error', resolve);
        c.once('end', () => resolve(new Error('LISTEN connection ended')));
      });
      try {
        await c.connect();
        c.on('notification', () => notifier.notify());
        await c.query(`LISTEN ${channel}`);
        client = c;
        backoff.reset();
        notifier.notify();
        // stop() may have come while we connected, before `client` was set for it to end.
        const why = await Promise.race([lost, stopped]);
        if (!abort.signal.aborted) onError(why);
      } catch (err) {
        if (!abort.signal.aborted) onError(err);
      } finally {
        client = null;
        c.removeAllListeners('notification');
        c.on('error', () => undefined);
        await c.end().catch(() => undefined);
      }
      await sleep(backoff.next(), abort.signal);
    }
  }

  const done = run();
  return {
    stop: async () => {
      abort.abort();
      await client?.end().catch(() => undefined);
      await done;
    },
  };
}
