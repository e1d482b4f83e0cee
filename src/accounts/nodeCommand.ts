import { parseArgs } from 'node:util';
import { isConvergeError, toConvergeError } from '../errors.ts';
import { enrollNode, revokeNode } from './nodeAccounts.ts';

// `converge node enroll <id>` / `converge node revoke <id>` (docs/operations.md, "Node accounts"). The CLI's
// dispatcher calls runNodeCommand with the arguments after `node`.

export type NodeCommandIo = Readonly<{
  stdout: (line: string) => void;
  stderr: (line: string) => void;
  env: Readonly<Record<string, string | undefined>>;
}>;

const usage = `usage: converge node enroll <id> [--vhost <vhost>] [--management-url <url>] [--replace] [--json]
       converge node revoke <id> [--vhost <vhost>] [--management-url <url>] [--json]
The management URL defaults to CONVERGE_MANAGEMENT_URL, then http://guest:guest@127.0.0.1:15672.`;

/** Returns the process exit status; prints a one-line reason on error (DESIGN §7). */
export async function runNodeCommand(argv: readonly string[], io: NodeCommandIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        vhost: { type: 'string' },
        'management-url': { type: 'string' },
        replace: { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    io.stderr(`converge node: ${(e as Error).message}`);
    io.stderr(usage);
    return 2;
  }
  const { values, positionals } = parsed;
  const [verb, id, ...rest] = positionals;
  if (values.help) {
    io.stdout(usage);
    return 0;
  }
  if ((verb !== 'enroll' && verb !== 'revoke') || id === undefined || rest.length > 0) {
    io.stderr(usage);
    return 2;
  }
  const managementUrl = values['management-url'] ?? io.env['CONVERGE_MANAGEMENT_URL'] ?? 'http://guest:guest@127.0.0.1:15672';
  const common = { managementUrl, ...(values.vhost === undefined ? {} : { vhost: values.vhost }) };
  try {
    if (verb === 'enroll') {
      const r = await enrollNode(id, { ...common, replace: values.replace === true });
      // The password is printed here, once, and nowhere else: Converge keeps no copy.
      if (values.json)
        io.stdout(
          JSON.stringify({
            node: r.node,
            vhost: r.vhost,
            password: r.password,
            replaced: r.replaced,
            permissions: r.permissions,
            topicPermissions: r.topicPermissions,
          }),
        );
      else {
        io.stdout(`${r.replaced ? 'rotated' : 'enrolled'} node ${r.node} in vhost ${r.vhost}`);
        io.stdout(`password: ${r.password}`);
        io.stdout('This password is shown once; give it to the node now.');
      }
    } else {
      const r = await revokeNode(id, common);
      if (values.json) io.stdout(JSON.stringify(r));
      else
        io.stdout(
          r.existed
            ? `revoked node ${r.node}; closed ${r.connectionsClosed} connection(s)`
            : `node ${r.node} had no broker account; closed ${r.connectionsClosed} connection(s)`,
        );
    }
    return 0;
  } catch (e) {
    const err = toConvergeError(e);
    io.stderr(`converge node ${verb}: ${err.code}: ${err.message}`);
    return isConvergeError(err, 'CONVERGE_ERR_NODE_ID_INVALID') ? 2 : 1;
  }
}
