import { enrollNode, revokeNode } from '../../brokerAdmin/nodeAccounts.ts';
import { ConvergeError, isConvergeError } from '../../core/errors.ts';
import type { Run } from '../command.ts';
import { nodeArgument } from '../command.ts';
import { printJson } from '../output.ts';

// `converge node enroll <id>` / `converge node revoke <id>` (docs/design.md §1): a node's broker account
// through RabbitMQ's management API, with the least rights wire.go allows.

export const run: Run = async ({ io, values, positionals, config, json }) => {
  const [verb, given] = positionals as [string, string];
  if (verb !== 'enroll' && verb !== 'revoke')
    throw new ConvergeError('CONVERGE_ERR_USAGE', `node takes enroll <id> or revoke <id>, not ${JSON.stringify(verb)}`);
  const id = nodeArgument(given);
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
