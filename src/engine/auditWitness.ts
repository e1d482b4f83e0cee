import { mkdirSync } from 'node:fs';
import { open, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { witnessFileName, witnessJson } from '../core/audit/checkpointCheck.ts';
import type { SignedCheckpoint } from '../core/audit/checkpoint.ts';
import { retry } from '../retry.ts';
import type { Witness } from './auditCheckpoints.ts';

// The witnesses a serving engine hands its checkpoints to (docs/audit.md#checkpoints-and-witnesses):
// a folder (another disk, a mount another host backs up) and a webhook. Each works through a
// queue of its own: the checkpointer hands a checkpoint over and goes on, so a slow disk or a
// receiver that is down never holds an append.

/** One JSON file per checkpoint, written to a temporary name, synced, then renamed: a file is whole or absent. */
export function createFolderWitness(dir: string, logger: Logger): Witness {
  mkdirSync(dir, { recursive: true });
  let chain: Promise<void> = Promise.resolve();
  async function write(signed: SignedCheckpoint): Promise<void> {
    const name = witnessFileName(signed);
    const tmp = join(dir, `.${name}.${process.pid}.tmp`);
    const file = await open(tmp, 'w', 0o644);
    try {
      await file.writeFile(witnessJson(signed));
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(tmp, join(dir, name));
  }
  return {
    name: `folder ${dir}`,
    hand(signed) {
      chain = chain.then(
        () => write(signed),
        () => write(signed),
      );
      chain.catch((err: unknown) =>
        logger.error({ err, dir, size: signed.checkpoint.size }, 'the witness folder did not take a checkpoint'),
      );
    },
    stop: () => chain.catch(() => undefined),
  };
}

export type WebhookWitnessOptions = Readonly<{
  /** Checkpoints waiting at most; past it the oldest is dropped (the newest covers it: a tree's later head). */
  maxPending?: number;
  minMs?: number;
  maxMs?: number;
  /** How long stop() keeps trying to deliver what is pending. */
  drainMs?: number;
  /** One POST's limit. */
  timeoutMs?: number;
}>;

/** POST each checkpoint's JSON to `url`, one at a time, retried with backoff until a 2xx. */
export function createWebhookWitness(url: string, logger: Logger, options: WebhookWitnessOptions = {}): Witness {
  const maxPending = options.maxPending ?? 1_000;
  const pending: SignedCheckpoint[] = [];
  const stopping = new AbortController();
  let loop: Promise<void> | null = null;

  async function post(signed: SignedCheckpoint): Promise<void> {
    const r = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: witnessJson(signed),
      signal: AbortSignal.any([stopping.signal, AbortSignal.timeout(options.timeoutMs ?? 10_000)]),
    });
    await r.body?.cancel();
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
  }

  async function deliver(): Promise<void> {
    while (pending.length > 0 && !stopping.signal.aborted) {
      const signed = pending[0]!;
      const r = await retry(() => post(signed), {
        minMs: options.minMs ?? 500,
        maxMs: options.maxMs ?? 60_000,
        jitter: 0.2,
        signal: stopping.signal,
        onError: (err, attempt) => {
          logger.warn({ err, url, size: signed.checkpoint.size, attempt }, 'the witness webhook did not take a checkpoint; retrying');
          return true;
        },
      });
      if (!r.ok) return;
      pending.shift();
    }
  }

  function kick(): void {
    if (loop !== null || stopping.signal.aborted) return;
    loop = deliver().finally(() => {
      loop = null;
      // One handed over while the loop was ending.
      if (pending.length > 0) kick();
    });
  }

  return {
    name: `webhook ${url}`,
    hand(signed) {
      pending.push(signed);
      if (pending.length > maxPending) {
        const dropped = pending.shift()!;
        logger.warn({ url, size: dropped.checkpoint.size }, 'the witness webhook is behind: an older checkpoint was dropped');
      }
      kick();
    },
    async stop() {
      const drained = loop ?? Promise.resolve();
      const timer = setTimeout(() => stopping.abort(), options.drainMs ?? 5_000);
      await drained;
      clearTimeout(timer);
      stopping.abort();
      if (pending.length > 0)
        logger.warn({ url, undelivered: pending.length }, 'stopped with checkpoints the witness webhook did not take');
    },
  };
}
