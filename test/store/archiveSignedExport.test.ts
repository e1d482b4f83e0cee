import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { makeAliveSeen, streamOf } from '../../src/core/events/index.ts';
import { createAuditCheckpoints } from '../../src/engine/auditCheckpoints.ts';
import { withArchive } from '../../src/store/archive/withArchive.ts';
import type { ArchivedStore } from '../../src/store/archive/withArchive.ts';
import { archiveSqliteStore } from '../../src/store/sqlite/sqliteArchive.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { evidenceBundle, withoutSummaries } from '../support/evidence.ts';
import { logger } from '../support/logger.ts';

// A signed export over an archive read from its segments' summaries (docs/audit.md "Proofs
// without the whole log"): the checkpoint that covers the node's events, and the latest one, end
// wherever the engine signed them, most often inside an archived range the node has no row in.
// The bundle must be the one a walk of every leaf gives, never a bare RangeError.

const dir = mkdtempSync(join(tmpdir(), 'converge-archive-signed-export-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const audit = generateKeyPairSync('ed25519');

const bundleOf = (store: ArchivedStore, node: string, at: string) => evidenceBundle(store, node, at, { auditKey: audit.publicKey });

test('a signed export over summarised segments whose checkpoints end inside ranges the node has no row in', async () => {
  const path = join(dir, 'fleet.db');
  const store = createSqliteEventStore(path);
  const cp = createAuditCheckpoints({ store, key: audit.privateKey, logger, everyEvents: 1, everyMs: 3_600_000, pollMs: 3_600_000 });
  await cp.start();
  // 12 nodes in turn, 100 days ago onwards; `early` is heard only among the first events, `late` only near the end.
  const start = Date.now() - 100 * 86_400_000;
  const nodes = Array.from({ length: 12 }, (_, i) => `n${i}`);
  for (let i = 0; i < 600; i++) {
    const node = i === 20 || i === 21 ? 'early' : i === 570 ? 'late' : nodes[i % nodes.length]!;
    await store.append([{ stream: streamOf(node), expected: 'any', events: [makeAliveSeen({ node }, start + i * 3_600_000)] }]);
    // Signed after an odd number of events, so most checkpoints cut the tree inside a segment's range.
    if (i % 37 === 36) await cp.checkpoint();
  }
  await cp.stop();
  const head = (await store.headPosition())!;
  await store.close();
  const moved = await archiveSqliteStore(path, {
    dir: join(dir, 'archive'),
    before: new Date().toISOString(),
    belowPosition: head,
    segmentEvents: 16,
  });
  assert.ok(moved.segments.length >= 20, `${moved.segments.length} segments`);

  const archived = await withArchive(createSqliteEventStore(path), join(dir, 'archive'));
  try {
    const moment = new Date(start + 300 * 3_600_000).toISOString();
    for (const [node, at] of [
      ['early', moment],
      ['early', 'checkpoint'],
      ['late', 'checkpoint'],
      ['n3', moment],
    ] as const) {
      const every = await bundleOf(withoutSummaries(archived), node, at);
      assert.equal(every.signed, true, `${node} at ${at}: signed`);
      const fromSummaries = await bundleOf(archived, node, at);
      assert.equal(JSON.stringify(fromSummaries), JSON.stringify(every), `${node} at ${at}: the bundle a walk of every leaf gives`);
    }
  } finally {
    await archived.close();
  }
});
