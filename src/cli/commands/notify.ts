import { resolve } from 'node:path';
import { ConvergeError } from '../../core/errors.ts';
import { notificationId, postMessage, single } from '../../notify/index.ts';
import { describeSecret, loadNotifyConfig } from '../../notify/notifyConfig.ts';
import type { DestinationConfig, NotifyConfig } from '../../notify/notifyConfig.ts';
import type { Run } from '../command.ts';
import { printList, printOne } from '../output.ts';

// `converge notify list` and `converge notify test <destination>` (docs/operations.md
// "Notifications"): what the notifications file says, secrets shown by where they come from, never
// by value; and one test message sent now to one destination, signed as real ones are, so an
// operator sees the receiver accept it before anything goes wrong.

const configOf = (path: string | null, cwd: string, env: Readonly<Record<string, string | undefined>>): NotifyConfig => {
  if (path === null)
    throw new ConvergeError(
      'CONVERGE_ERR_USAGE',
      'notify needs the notifications file: --notify-config <file> (or CONVERGE_NOTIFY_CONFIG)',
    );
  return loadNotifyConfig(resolve(cwd, path), env);
};

type Listed = Readonly<{
  name: string;
  kind: string;
  url: string;
  secret: string;
  minSeverity: string;
  triggers: readonly string[] | 'all';
  filter: Readonly<{ nodePrefix: string | null; specDigest: string | null; rollout: string | null }>;
}>;

/** The URL without a password or query (a Slack hook's path is its secret: only its start is shown). */
const safeUrl = (url: string, kind: string): string => {
  const u = new URL(url);
  u.password = '';
  u.username = '';
  u.search = '';
  const text = u.toString();
  return kind === 'slack' && u.pathname.length > 12 ? `${u.origin}${u.pathname.slice(0, 12)}…` : text;
};

const listed = (d: DestinationConfig): Listed => ({
  name: d.name,
  kind: d.kind,
  url: safeUrl(d.url, d.kind),
  secret: describeSecret(d.secret),
  minSeverity: d.filter.minSeverity,
  triggers: d.filter.triggers ?? 'all',
  filter: { nodePrefix: d.filter.nodePrefix ?? null, specDigest: d.filter.specDigest ?? null, rollout: d.filter.rollout ?? null },
});

export const run: Run = async ({ io, positionals, config, output }) => {
  const [verb, name] = positionals as [string, string | undefined];
  const file = configOf(config.notifyConfig, io.cwd, io.env);
  if (verb === 'list') {
    if (name !== undefined) throw new ConvergeError('CONVERGE_ERR_USAGE', 'notify list takes no destination');
    printList(io, output, file.destinations.map(listed), {
      headers: ['NAME', 'KIND', 'URL', 'SECRET', 'SEVERITY', 'TRIGGERS'],
      row: (d) => [d.name, d.kind, d.url, d.secret, `≥ ${d.minSeverity}`, d.triggers === 'all' ? 'all' : d.triggers.join(',')],
      name: (d) => d.name,
    });
    return 0;
  }
  if (verb !== 'test') throw new ConvergeError('CONVERGE_ERR_USAGE', `notify takes list or test, not ${JSON.stringify(verb)}`);
  if (name === undefined)
    throw new ConvergeError('CONVERGE_ERR_USAGE', 'notify test needs a destination name (converge notify list shows them)');
  const d = file.destinations.find((x) => x.name === name);
  if (d === undefined)
    throw new ConvergeError(
      'CONVERGE_ERR_USAGE',
      `no destination ${JSON.stringify(name)} in ${file.path} (it has ${file.destinations.map((x) => x.name).join(', ') || 'none'})`,
    );
  const time = new Date().toISOString();
  const eventId = `notify-test/${d.name}/${time}`;
  const message = single({
    id: notificationId(eventId, 'notify.test'),
    trigger: 'notify.test',
    severity: 'info',
    position: 0n,
    eventId,
    time,
    node: null,
    rollout: null,
    specDigest: null,
    summary: `a test message from converge notify test to ${d.name}`,
    facts: { destination: d.name },
  });
  const started = performance.now();
  try {
    const status = await postMessage(d, message);
    const result = { destination: d.name, delivered: true, status, id: message.id, ms: Math.round(performance.now() - started) };
    printOne(io, output, result, {
      text: () => `${d.name}: delivered (HTTP ${status}) in ${result.ms} ms, id ${message.id}\n`,
      name: d.name,
    });
    return 0;
  } catch (err) {
    const why = (err as Error).message;
    const result = { destination: d.name, delivered: false, error: why, id: message.id };
    printOne(io, output, result, { text: () => `${d.name}: not delivered: ${why}\n`, name: d.name });
    return 1;
  }
};
