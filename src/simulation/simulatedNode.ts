import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { digestOf, readDeclaration, verifyDeclaration } from '../core/declaration/index.ts';
import type { Declaration, VerifyingKey } from '../core/declaration/index.ts';
import type { NodeLink } from '../transport/port.ts';
import { encodeAlive, encodeReport, parseSigned } from '../core/wire/index.ts';
import type { Report } from '../core/wire/index.ts';
import { sleep } from '../retry.ts';

// A node as the Go binary behaves (docs/design.md §1, wire.go): take a Signed declaration from its
// inbox, verify the signature over the bytes as received, only then parse them, apply (here:
// wait), and report the digest of exactly those bytes. One declaration at a time, so an apply
// that outlasts the gap between two sends produces the seed's race: a report about A that
// lands after B was sent.

export type SimulatedNodeOptions = Readonly<{
  link: NodeLink;
  verifyingKey: VerifyingKey;
  logger: Logger;
  /** How long applying one declaration takes (ms), or a function of it. */
  applyDelayMs?: number | ((d: Declaration) => number);
  /** Awaited before each apply, after the delay: a fault test holds a node until its faults are done. */
  beforeApply?: (d: Declaration) => Promise<void>;
  /** Send alive this often (ms); 0 never. */
  aliveEveryMs?: number;
  /** Refuse every declaration whole with this reason. */
  refuse?: string | null;
  /** Fail these resources (id → reason), apply the rest. */
  fail?: Readonly<Record<string, string>> | ((resourceId: string) => string | null);
  /** Ports the host raised itself, reported as `carried`. */
  carried?: readonly number[];
  /** Receive and apply, but never report or say alive (a node that went quiet). */
  silent?: boolean;
  /**
   * How the node checks a declaration's signature (default: verifyDeclaration). A bench that runs
   * a whole fleet on one thread may check a sample: real nodes verify on CPUs of their own, at once.
   */
  verify?: (bytes: Uint8Array, signature: Uint8Array, key: VerifyingKey) => boolean;
}>;

export type ConfirmedReport = Readonly<{ messageId: string; declared: string | null; report: Report }>;

export type SimulatedNode = Readonly<{
  node: string;
  start: () => Promise<void>;
  stop: () => Promise<void>;
  /** Reports the broker confirmed, in order: what the engine must have stored exactly once. */
  confirmedReports: () => readonly ConfirmedReport[];
  /** Digests applied, in order. */
  applied: () => readonly string[];
  /** Declarations refused because their signature did not verify. */
  badSignatures: () => number;
  /** Publish a report now (tests); resolves once confirmed. */
  report: (r: Partial<Report>) => Promise<ConfirmedReport>;
  setSilent: (silent: boolean) => void;
}>;

export function createSimulatedNode(options: SimulatedNodeOptions): SimulatedNode {
  const { link, verifyingKey } = options;
  const verify = options.verify ?? verifyDeclaration;
  const node = link.node;
  const logger = options.logger.child({ node, component: 'simulated-node' });
  const confirmed: ConfirmedReport[] = [];
  const applied: string[] = [];
  let badSignatures = 0;
  let silent = options.silent ?? false;
  let aliveTimer: NodeJS.Timeout | null = null;
  let stopped = false;
  // stop() ends the waits below, an apply's delay included: a slow node's delay is longer than the
  // demo's interval, and a timer left running would hold the process after Ctrl-C.
  const stopping = new AbortController();

  const failOf = (id: string): string | null => {
    const f = options.fail;
    if (f === undefined) return null;
    return typeof f === 'function' ? f(id) : (f[id] ?? null);
  };

  async function publishReport(partial: Partial<Report>): Promise<ConfirmedReport> {
    const report: Report = { node, applied: [], failed: {}, refused: '', carried: options.carried ?? [], declared: null, ...partial };
    const messageId = `${node}/${randomUUID()}`;
    const body = encodeReport(report);
    // Retry until confirmed with the same message id: a publish whose confirm was lost may
    // still have landed, and the id makes the engine store it once (docs/design.md §2).
    for (let attempt = 0; ; attempt++) {
      try {
        await link.publish('report', body, messageId);
        break;
      } catch (err) {
        if (stopped) throw err;
        logger.debug({ err: (err as Error).message, attempt }, 'report not confirmed; retrying');
        await sleep(Math.min(50 * 2 ** attempt, 2_000), stopping.signal);
      }
    }
    const c = { messageId, declared: report.declared, report };
    confirmed.push(c);
    return c;
  }

  async function onDeclaration(body: Buffer): Promise<void> {
    let bytes: Buffer;
    let decl: Declaration;
    try {
      const signed = parseSigned(body);
      if (!verify(signed.declaration, signed.signature, verifyingKey)) {
        badSignatures++;
        logger.warn({}, 'declaration signature does not verify; refusing it');
        if (!silent) await publishReport({ refused: 'signature does not verify', declared: digestOf(signed.declaration) });
        return;
      }
      bytes = signed.declaration;
      decl = readDeclaration(bytes);
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'unreadable declaration dropped');
      return;
    }
    const digest = digestOf(bytes);
    const delay = typeof options.applyDelayMs === 'function' ? options.applyDelayMs(decl) : (options.applyDelayMs ?? 0);
    if (delay > 0) await sleep(delay, stopping.signal);
    if (options.beforeApply !== undefined) await options.beforeApply(decl);
    if (stopped) return;
    applied.push(digest);
    if (silent) return;
    if (options.refuse) {
      await publishReport({ refused: options.refuse, declared: digest });
      return;
    }
    const failed: Record<string, string> = {};
    const ok: string[] = [];
    for (const r of decl.resources) {
      const why = failOf(r.id);
      if (why === null) ok.push(r.id);
      else failed[r.id] = why;
    }
    await publishReport({ applied: ok, failed, declared: digest });
  }

  function sendAlive(): void {
    if (silent || stopped) return;
    link
      .publish('alive', encodeAlive({ node }), `${node}/alive/${randomUUID()}`)
      .catch((err: unknown) => logger.debug({ err: (err as Error).message }, 'alive not confirmed'));
  }

  return {
    node,
    start: async () => {
      await link.consume(onDeclaration);
      const every = options.aliveEveryMs ?? 0;
      if (every > 0) {
        sendAlive();
        aliveTimer = setInterval(sendAlive, every);
      }
    },
    stop: async () => {
      stopped = true;
      stopping.abort();
      if (aliveTimer !== null) clearInterval(aliveTimer);
      await link.close();
    },
    confirmedReports: () => confirmed,
    applied: () => applied,
    badSignatures: () => badSignatures,
    report: publishReport,
    setSilent: (s) => {
      silent = s;
    },
  };
}
