import type { KeyObject } from 'node:crypto';
import type { Logger } from 'pino';
import { signCheckpoint } from '../core/audit/checkpoint.ts';
import type { SignedCheckpoint } from '../core/audit/checkpoint.ts';
import { auditStream, makeAuditCheckpointed } from '../core/events/index.ts';
import type { EventStore } from '../store/port.ts';

// The engine signs the audit tree's head now and then (docs/audit.md#checkpoints-and-witnesses):
// every `everyEvents` events, or `everyMs` if anything was appended since, and on stop. Each
// checkpoint is appended to the log (stream `audit`) and handed to the witnesses, which keep it
// outside the store. Its cost is one read of the head row a second and one signature and append
// per checkpoint; ingest never waits on it.

/** Something outside the store that keeps every checkpoint: `hand` must not wait on it. */
export type Witness = Readonly<{
  name: string;
  hand: (signed: SignedCheckpoint) => void;
  /** Deliver what is pending (within the witness's own bound), then stop. */
  stop: () => Promise<void>;
}>;

export type AuditCheckpointsOptions = Readonly<{
  store: EventStore;
  key: KeyObject;
  logger: Logger;
  everyEvents: number;
  everyMs: number;
  witnesses?: readonly Witness[];
  now?: () => number;
  /** How often the head is read (default: a second, or everyMs if shorter). */
  pollMs?: number;
}>;

export type AuditCheckpoints = Readonly<{
  start: () => Promise<void>;
  /** Sign the head now if anything was appended since the last checkpoint; the checkpoint, or null. */
  checkpoint: () => Promise<SignedCheckpoint | null>;
  /** A last checkpoint, then the witnesses drained. */
  stop: () => Promise<void>;
}>;

export function createAuditCheckpoints(o: AuditCheckpointsOptions): AuditCheckpoints {
  const now = o.now ?? Date.now;
  const witnesses = o.witnesses ?? [];
  const pollMs = o.pollMs ?? Math.min(1_000, o.everyMs);
  /** The size last signed (-1: none yet), and whether this engine's own event followed it into the log. */
  let lastSize = -1;
  let ownEventAfter = false;
  let lastAt = now();
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = true;

  /** Events appended since the last checkpoint, not counting the checkpoint's own event. */
  const appendedSince = (size: number): number => size - Math.max(0, lastSize) - (ownEventAfter ? 1 : 0);

  async function sign(force: boolean): Promise<SignedCheckpoint | null> {
    const head = await o.store.auditHead();
    const size = Number(head.size);
    const fresh = appendedSince(size);
    const due = lastSize < 0 ? size > 0 : fresh >= o.everyEvents || (fresh > 0 && (force || now() - lastAt >= o.everyMs));
    if (!due) return null;
    const signed = signCheckpoint({ size, root: head.root, at: new Date(now()).toISOString() }, o.key);
    const r = await o.store.append([{ stream: auditStream, expected: 'any', events: [makeAuditCheckpointed(signed)] }]);
    lastSize = size;
    ownEventAfter = r.streams[0]!.written > 0;
    lastAt = now();
    o.logger.info(
      { size, root: head.root, keyId: signed.checkpoint.keyId, position: r.position?.toString() ?? null },
      'audit checkpoint signed',
    );
    for (const w of witnesses) w.hand(signed);
    return signed;
  }

  /** One at a time: a tick and stop() never sign the same head twice. */
  const serial = <T>(f: () => Promise<T>): Promise<T> => {
    const p = running.then(f, f);
    running = p.catch(() => undefined);
    return p;
  };

  function schedule(): void {
    if (stopped) return;
    timer = setTimeout(() => {
      void serial(() => sign(false))
        .catch((err: unknown) => o.logger.warn({ err }, 'audit checkpoint failed; trying again at the next one'))
        .finally(schedule);
    }, pollMs);
    timer.unref();
  }

  return {
    async start() {
      // Go on from the last checkpoint in the log, so a restart does not sign an unchanged head again.
      const [last] = await o.store.readStream(auditStream, { direction: 'backwards', limit: 1 });
      if (last?.type === 'AuditCheckpointed') {
        lastSize = last.data.size;
        ownEventAfter = true;
      }
      lastAt = now();
      stopped = false;
      schedule();
    },
    checkpoint: () => serial(() => sign(true)),
    async stop() {
      if (stopped) return;
      stopped = true;
      if (timer !== null) clearTimeout(timer);
      try {
        await serial(() => sign(true));
      } catch (err) {
        o.logger.warn({ err }, 'the checkpoint on stop failed');
      }
      await Promise.all(witnesses.map((w) => w.stop()));
    },
  };
}
