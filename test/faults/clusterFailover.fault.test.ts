import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { startRabbitCluster } from '../support/rabbitCluster.ts';
import type { RabbitCluster } from '../support/rabbitCluster.ts';
import { describeOnService } from '../support/services.ts';
import { clusterFailoverFaults, runClusterFailover } from './clusterFailoverScenario.ts';

// RELIABILITY.md row "cluster failover": a 3-node cluster of our own, started once
// for this file by scripts/rabbitmq-cluster.sh beside the system broker and removed at the end,
// even on failure (and by the script's watchdog if this process dies). Starting it is the probe:
// if it cannot start, the suite fails under CONVERGE_REQUIRE_BROKER=1 and skips loudly otherwise.

let cluster: RabbitCluster | null = null;
const dir = mkdtempSync(join(tmpdir(), 'converge-failover-'));
/** Closers of what a run opened: a timed-out run leaves connections that would reconnect forever. */
const leftovers = new Set<() => Promise<void>>();

const startCluster = async (): Promise<{ ok: true } | { ok: false; reason: string }> => {
  try {
    cluster = await startRabbitCluster();
    return { ok: true };
  } catch (e) {
    return { ok: false, reason: (e as Error).message };
  }
};

after(async () => {
  for (const close of leftovers) await close().catch(() => undefined);
  await cluster?.remove();
  rmSync(dir, { recursive: true, force: true });
});

describeOnService('a 3-node RabbitMQ cluster', startCluster, 'engine over a RabbitMQ cluster', () => {
  test(
    `${clusterFailoverFaults('stop')}: ingest resumes on another node, every confirmed report stored exactly once, the relay publishes again`,
    { timeout: 180_000 },
    async (t) => {
      const r = await runClusterFailover(cluster!, 'stop', dir, leftovers);
      t.diagnostic(
        `${r.sent} sent, ${r.confirmed} confirmed, ${r.stored} stored; failover in ${r.recoverMs ?? '—'} ms; ${r.notes.join('; ')}`,
      );
      assert.ok(r.sent > 0);
      assert.equal(r.confirmed, r.sent, 'every report was eventually confirmed by the broker');
      assert.equal(r.lost, 0, 'confirmed reports missing from the store');
      assert.equal(r.duplicated, 0, 'reports stored more than once');
      assert.notEqual(r.recoverMs, null, 'ingest never resumed after the node was stopped');
      for (const [check, held] of Object.entries(r.checks)) assert.equal(held, true, `${check} did not hold; ${r.notes.join('; ')}`);
    },
  );
});
