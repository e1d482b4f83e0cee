import { enrollNode, revokeNode } from '../../brokerAdmin/nodeAccounts.ts';
import { ConvergeError, isConvergeError } from '../../core/errors.ts';
import type { Context, Run } from '../command.ts';
import { nodeArgument, withStore } from '../command.ts';
import { printJson } from '../output.ts';
import { who } from '../operator.ts';
import type { HoldVerb } from '../../engine/holds.ts';

// `converge node enroll <id>` / `converge node revoke <id>` (docs/design.md §1): a node's broker account
// through RabbitMQ's management API, with the least rights wire.go allows.

/** docs/design.md §3 "Retired nodes": a NodeRetired in the node's stream; no broker is touched. */
async function retire({ io, values, config, json }: Context, id: string): Promise<number> {
  if (values.replace === true || values.vhost !== undefined)
    throw new ConvergeError('CONVERGE_ERR_USAGE', '--replace and --vhost are not for node retire');
  const reason = typeof values.reason === 'string' ? values.reason : '';
  const { retireNode } = await import('../../engine/retire.ts');
  // A write: the kept rows (the stream's last event) are what it reads; it needs no archive.
  const r = await withStore(config, io, (store) => retireNode(store, id, { now: new Date(), reason }), 'hot');
  if (json) printJson(io, { node: r.node, retiredAt: r.retiredAt, position: r.position?.toString() ?? null });
  else io.stdout(`retired node ${r.node} at ${r.retiredAt}: out of the fleet views; its history stays (a send brings it back)\n`);
  return 0;
}

/** docs/design.md §8 "Holds and pins": an event in the `holds` stream; no broker is touched. */
async function hold({ io, values, config, json }: Context, id: string, verb: HoldVerb): Promise<number> {
  if (values.replace === true || values.vhost !== undefined)
    throw new ConvergeError('CONVERGE_ERR_USAGE', `--replace and --vhost are not for node ${verb}`);
  const reason = typeof values.reason === 'string' ? values.reason : '';
  const { setHold } = await import('../../engine/holds.ts');
  const by = who({ io });
  const r = await withStore(config, io, (store) => setHold(store, id, verb, { now: new Date(), by, reason }), 'hot');
  if (json) printJson(io, { node: r.node, held: r.hold.held, pinned: r.hold.pinned, position: r.position?.toString() ?? null });
  else io.stdout(`${holdSaid[verb]} node ${r.node} at ${r.at}${holdMeans[verb]}\n`);
  return 0;
}

const holdSaid: Readonly<Record<HoldVerb, string>> = { hold: 'held', release: 'released', pin: 'pinned', unpin: 'unpinned' };
const holdMeans: Readonly<Record<HoldVerb, string>> = {
  hold: ': rollouts skip it (listed as held) until it is released',
  release: ': rollouts send to it again',
  pin: ': it keeps its spec (rollouts skip it; a direct send needs --force)',
  unpin: ': rollouts and sends reach it again',
};
const holdVerbs: readonly string[] = ['hold', 'release', 'pin', 'unpin'];

export const run: Run = async (ctx) => {
  const { io, values, positionals, config, json } = ctx;
  const [verb, given] = positionals as [string, string];
  if (verb !== 'enroll' && verb !== 'revoke' && verb !== 'retire' && !holdVerbs.includes(verb))
    throw new ConvergeError(
      'CONVERGE_ERR_USAGE',
      `node takes enroll, revoke, retire, hold, release, pin or unpin <id>, not ${JSON.stringify(verb)}`,
    );
  const id = nodeArgument(given);
  if (verb !== 'retire' && verb !== 'hold' && verb !== 'pin' && values.reason !== undefined)
    throw new ConvergeError('CONVERGE_ERR_USAGE', '--reason is for node retire, hold and pin');
  if (verb === 'retire') return retire(ctx, id);
  if (holdVerbs.includes(verb)) return hold(ctx, id, verb as HoldVerb);
  if (verb === 'revoke' && values.replace === true) throw new ConvergeError('CONVERGE_ERR_USAGE', '--replace is for node enroll');
  const common = { managementUrl: config.managementUrl, ...(typeof values.vhost === 'string' ? { vhost: values.vhost } : {}) };
  if (verb === 'revoke') {
    const r = await revokeNode(id, common);
    if (json) printJson(io, r);
    else
      io.stdout(
        r.existed
          ? `revoked node ${r.node}; closed ${r.connectionsClosed} connection(s)\n`
          : `node ${r.node} had no broker account; closed ${r.connectionsClosed} connection(s)\n`,
      );
    return 0;
  }
  let r;
  try {
    r = await enrollNode(id, { ...common, replace: values.replace === true, inbox: config.inboxQueue });
  } catch (e) {
    if (isConvergeError(e, 'CONVERGE_ERR_NODE_EXISTS') && e.details?.replaceable === true)
      throw new ConvergeError(
        'CONVERGE_ERR_NODE_EXISTS',
        `node ${id} already has a broker account; revoke it, or rotate its password with converge node enroll ${id} --replace`,
        { cause: e },
      );
    throw e;
  }
  // The password is printed here, once, and nowhere else: Converge keeps no copy.
  if (json) {
    const { node, vhost, password, replaced, permissions, topicPermissions, inbox } = r;
    printJson(io, { node, vhost, password, replaced, permissions, topicPermissions, inbox });
  } else {
    io.stdout(`${r.replaced ? 'rotated' : 'enrolled'} node ${r.node} in vhost ${r.vhost}\n`);
    if (r.inbox !== null)
      io.stdout(
        r.inbox.outcome === 'declared'
          ? `inbox ${r.inbox.queue} declared\n`
          : `inbox ${r.inbox.queue} exists in an earlier form and was left as it is (converge broker migrate-inboxes brings it to the current form)\n`,
      );
    io.stdout(`password: ${r.password}\n`);
    io.stdout('This password is shown once; give it to the node now.\n');
  }
  return 0;
};
