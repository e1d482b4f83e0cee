import { enrollNode, revokeNode } from '../../brokerAdmin/nodeAccounts.ts';
import { ConvergeError, isConvergeError } from '../../core/errors.ts';
import type { Context, Run } from '../command.ts';
import { nodeArgument, withStore } from '../command.ts';
import { printJson } from '../output.ts';

// `converge node enroll <id>` / `converge node revoke <id>` (docs/design.md §1): a node's broker account
// through RabbitMQ's management API, with the least rights wire.go allows.

/** docs/design.md §3 "Retired nodes": a NodeRetired in the node's stream; no broker is touched. */
async function retire({ io, values, config, json }: Context, id: string): Promise<number> {
  if (values.replace === true || values.vhost !== undefined)
    throw new ConvergeError('CONVERGE_ERR_USAGE', '--replace and --vhost are not for node retire');
  const reason = typeof values.reason === 'string' ? values.reason : '';
  const { retireNode } = await import('../../engine/retire.ts');
  const r = await withStore(config, io, (store) => retireNode(store, id, { now: new Date(), reason }));
  if (json) printJson(io, { node: r.node, retiredAt: r.retiredAt, position: r.position?.toString() ?? null });
  else io.stdout(`retired node ${r.node} at ${r.retiredAt}: out of the fleet views; its history stays (a send brings it back)\n`);
  return 0;
}

export const run: Run = async (ctx) => {
  const { io, values, positionals, config, json } = ctx;
  const [verb, given] = positionals as [string, string];
  if (verb !== 'enroll' && verb !== 'revoke' && verb !== 'retire')
    throw new ConvergeError('CONVERGE_ERR_USAGE', `node takes enroll <id>, revoke <id> or retire <id>, not ${JSON.stringify(verb)}`);
  const id = nodeArgument(given);
  if (verb !== 'retire' && values.reason !== undefined) throw new ConvergeError('CONVERGE_ERR_USAGE', '--reason is for node retire');
  if (verb === 'retire') return retire(ctx, id);
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
