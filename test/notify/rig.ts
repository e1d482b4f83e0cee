import { after } from 'node:test';
import { createNotifier, parseNotifyConfig } from '../../src/notify/index.ts';
import type { Fetch, Notifier } from '../../src/notify/index.ts';
import type { Clock } from '../../src/retry.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import type { ProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { startReceiver } from './receiver.ts';
import type { Receiver } from './receiver.ts';

// An engine's read side on a memory store with a notifier delivering to one real HTTP receiver
// (the destination `hook`, signed with `secret`); everything is stopped after the file's tests.

export const secret = 'shh-test-secret';
const cleanup: (() => Promise<void>)[] = [];
after(async () => {
  for (const c of cleanup.reverse()) await c();
});

export type Rig = {
  store: EventStore;
  runner: ProjectionRunner;
  notifier: Notifier;
  receiver: Receiver;
  h: ReturnType<typeof historyInStore>;
};

export async function rig(
  destination: Record<string, unknown> = {},
  store: EventStore = createMemoryEventStore(),
  extra: Readonly<{ clock?: Clock; fetch?: Fetch }> = {},
): Promise<Rig> {
  const receiver = await startReceiver();
  const config = parseNotifyConfig(
    JSON.stringify({
      destinations: [
        {
          name: 'hook',
          kind: 'webhook',
          url: receiver.url,
          secret: { env: 'TEST_NOTIFY_SECRET' },
          retry: { minMs: 10, maxMs: 100 },
          ...destination,
        },
      ],
    }),
    'test.json',
    { TEST_NOTIFY_SECRET: secret },
  );
  const runner = createProjectionRunner({ store, logger });
  const notifier = createNotifier({ config, store, readModel: runner.readModel, logger, ...extra });
  await notifier.prepare();
  await runner.start();
  await notifier.begin();
  await runner.caughtUp();
  cleanup.push(async () => {
    await notifier.stop();
    await runner.stop();
    await receiver.close();
  });
  return { store, runner, notifier, receiver, h: historyInStore(store) };
}

/** `trigger:node` of every notification received, in order. */
export const ids = (r: Receiver): string[] =>
  r.received.flatMap((m) => m.json.data.notifications.map((n) => `${n.trigger}:${n.node ?? ''}`));
