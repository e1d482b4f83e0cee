import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { isConvergeError } from '../../src/core/errors.ts';
import { storeIdentity } from '../../src/engine/storeIdentity.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { openEventStore } from '../../src/store/index.ts';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import type { AmqpConnection } from '../../src/transport/amqpConnection.ts';
import { claimVhost, vhostOwnerQueue } from '../../src/transport/vhostOwner.ts';
import { createScratchVhost, describeOnBroker } from '../support/broker.ts';
import type { ScratchVhost } from '../support/broker.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import { startServe } from '../support/serveProcess.ts';
import type { ServeProcess } from '../support/serveProcess.ts';

// Two engines with different stores on one vhost would split the reports between their stores
// without a word (docs/operations.md#one-store-per-vhost): the second refuses to start, naming both;
// two engines of the same store (the PostgreSQL HA pair) share the vhost as before.

describeOnBroker('one store per vhost', () => {
  let scratch: ScratchVhost;
  let dir: string;
  const conns: AmqpConnection[] = [];
  const serves: ServeProcess[] = [];
  const connect = async (): Promise<AmqpConnection> => {
    const c = await connectAmqp({ url: scratch.amqpUrl, logger });
    conns.push(c);
    return c;
  };
  before(async () => {
    scratch = await createScratchVhost('converge-int-owner');
    dir = mkdtempSync(join(tmpdir(), 'converge-owner-'));
  });
  after(async () => {
    for (const c of conns) await c.close();
    for (const s of serves) await s.kill();
    await scratch?.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a store's identity is kept in the store: the same after reopening, another for another store", async () => {
    const path = join(dir, 'a.db');
    const a1 = await openEventStore(`sqlite:${path}`);
    const id = await storeIdentity(a1);
    assert.match(id, /^[0-9a-f]{16}$/);
    assert.equal(await storeIdentity(a1), id);
    await a1.close();
    const a2 = await openEventStore(`sqlite:${path}`);
    assert.equal(await storeIdentity(a2), id);
    await a2.close();
    const other = createMemoryEventStore();
    assert.notEqual(await storeIdentity(other), id);
    await other.close();
  });

  test('the first store claims the vhost; an engine of the same store is let in; another store is refused naming both while one runs', async () => {
    const a = { id: 'aaaaaaaaaaaaaaaa', store: 'sqlite:/data/a.db', engine: 'engine-a' };
    const b = { id: 'bbbbbbbbbbbbbbbb', store: 'postgres://db/b', engine: 'engine-b' };
    const a1 = await connect();
    assert.deepEqual(await claimVhost(a1, a, { logger }), { owner: a.id, shared: false });
    // The HA pair: another engine (another connection) on the same store.
    const a2 = await connect();
    assert.deepEqual(await claimVhost(a2, { ...a, engine: 'engine-a2' }, { logger }), { owner: a.id, shared: false });
    await assert.rejects(
      claimVhost(await connect(), b, { logger }),
      (e: unknown) =>
        isConvergeError(e) &&
        e.code === 'CONVERGE_ERR_VHOST_SHARED' &&
        e.message.includes(a.id) &&
        e.message.includes(a.store) &&
        e.message.includes(b.id) &&
        e.message.includes(b.store) &&
        /--allow-shared-vhost/.test(e.message),
    );
    // Allowed on purpose: an error logged, and the owner stays the first store.
    assert.deepEqual(await claimVhost(await connect(), b, { logger, allowShared: true }), { owner: a.id, shared: true });
    // One of the pair stops: the other still runs, so b is still refused.
    await a1.close();
    await assert.rejects(claimVhost(await connect(), b, { logger }), /CONVERGE_ERR_VHOST_SHARED|split the reports/);
    // The marker is still there, exactly one, for the next engine to read.
    const ch = await (await connect()).createChannel();
    assert.equal((await ch.checkQueue(vhostOwnerQueue)).messageCount, 1);
    await ch.close();
    // No engine of store a runs (the allowed b still announces itself, not a): b takes the vhost over.
    await a2.close();
    const taken = await until('store b to take over once no engine of a runs', async () => {
      const r = await claimVhost(await connect(), b, { logger }).catch(() => null);
      return r?.owner === b.id ? r : null;
    });
    assert.deepEqual(taken, { owner: b.id, shared: false });
  });

  test('serve (the built CLI) on a vhost another store claimed exits 1 naming both stores; the owner runs on', async () => {
    const own = await createScratchVhost('converge-int-owner-cli');
    try {
      const env = (db: string) => ({
        CONVERGE_STORE: `sqlite:${join(dir, db)}`,
        CONVERGE_AMQP_URL: own.amqpUrl,
        CONVERGE_MANAGEMENT_URL: own.managementUrl,
        CONVERGE_PORT: '0',
      });
      const first = startServe(['serve'], env('first.db'));
      serves.push(first);
      await first.url;
      const second = startServe(['serve'], env('second.db'));
      serves.push(second);
      const { code } = await second.exited;
      assert.equal(code, 1, second.stderr().slice(-2000));
      assert.match(second.stderr(), /CONVERGE_ERR_VHOST_SHARED/);
      assert.match(second.stderr(), new RegExp(`first\\.db.*second\\.db`));
      assert.equal(first.child.exitCode, null, 'the first engine still runs');
      assert.equal(await first.stop(), 0);
    } finally {
      await own.remove();
    }
  });
});
