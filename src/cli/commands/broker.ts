import { migrateInboxes } from '../../brokerAdmin/inboxMigration.ts';
import type { InboxMigrationResult } from '../../brokerAdmin/inboxMigration.ts';
import { ConvergeError } from '../../core/errors.ts';
import type { Run } from '../command.ts';
import { printJson } from '../output.ts';

// `converge broker migrate-inboxes` (docs/operations.md): node inboxes declared by an
// earlier Converge become the inbox `nodeTopology` declares now, keeping the latest declaration
// each held. A dry run unless --apply: it lists what would change and changes nothing.

export const run: Run = async ({ io, values, positionals, config, json }) => {
  const [verb] = positionals as [string];
  if (verb !== 'migrate-inboxes')
    throw new ConvergeError('CONVERGE_ERR_USAGE', `broker takes migrate-inboxes, not ${JSON.stringify(verb)}`);
  if (values.apply === true && values['dry-run'] === true)
    throw new ConvergeError('CONVERGE_ERR_USAGE', '--apply and --dry-run contradict each other');
  if (config.amqpUrl === null)
    throw new ConvergeError(
      'CONVERGE_ERR_USAGE',
      'broker migrate-inboxes needs the broker: set --amqp (or CONVERGE_AMQP_URL) to the engine’s AMQP URL',
    );
  const apply = values.apply === true;
  const url = config.amqpUrl.split(',')[0]!.trim();
  const r = await migrateInboxes({
    managementUrl: config.managementUrl,
    amqpUrl: url,
    inbox: config.inboxQueue,
    dryRun: !apply,
    onProgress: json
      ? undefined
      : (p) =>
          io.stdout(
            `[${p.index}/${p.total}] ${p.queue}: ${p.resumed ? 'finished an interrupted migration' : 'migrated'}` +
              `${p.resumed ? '' : `, ${p.held} declaration(s) held`}${p.moved ? ', the latest moved' : ''}\n`,
          ),
  });
  if (json) printJson(io, { dryRun: !apply, ...r });
  else io.stdout(summary(r, apply));
  return 0;
};

function summary(r: InboxMigrationResult, applied: boolean): string {
  const lines: string[] = [];
  if (applied) {
    lines.push(
      `${r.outdated.length} of ${r.inboxes} inboxes in vhost ${r.vhost} had other arguments than this Converge declares (--inbox-queue ${r.inbox})`,
    );
    lines.push(`migrated ${r.migrated} inboxes; ${r.moved} latest declaration(s) moved`);
    return `${lines.join('\n')}\n`;
  }
  lines.push(
    `${r.outdated.length} of ${r.inboxes} inboxes in vhost ${r.vhost} have other arguments than this Converge declares (--inbox-queue ${r.inbox})`,
  );
  // Grouped by form: at 100,000 nodes a line per inbox would bury the answer.
  const forms = new Map<string, { count: number; messages: number; consumers: number; example: string }>();
  for (const o of r.outdated) {
    const key = `${o.type} ${JSON.stringify(o.arguments)}`;
    const f = forms.get(key) ?? { count: 0, messages: 0, consumers: 0, example: o.queue };
    f.count++;
    f.messages += o.messages;
    f.consumers += o.consumers;
    forms.set(key, f);
  }
  for (const [form, f] of forms)
    lines.push(`  ${form}: ${f.count} inboxes (e.g. ${f.example}), ${f.messages} ready declaration(s), ${f.consumers} consumer(s)`);
  if (r.interrupted.length > 0) lines.push(`${r.interrupted.length} migration(s) an earlier run left unfinished (holding queues)`);
  lines.push(`dry run: nothing changed. Run again with --apply to migrate (docs/operations.md, "Migrating node inboxes").`);
  return `${lines.join('\n')}\n`;
}
