import { specDigestOf, validateSpec } from '../core/declaration/index.ts';
import type { Spec } from '../core/declaration/index.ts';
import { ConvergeError } from '../core/errors.ts';
import { validateNodeId } from '../core/wire/nodeId.ts';

// The items of a bulk send (sendBatch.ts) checked before anything is built: the node ids, each
// named once, and the specs, each distinct one validated and digested once.

/** An item that passed validation, with its index among the items; `specText`: its resources as the bytes hold them. */
export type Todo = { i: number; node: string; spec: Spec; specDigest: string; specText: string };

/**
 * The items to record: a node id or a spec that is wrong is that item's answer (`refuse`), not
 * the batch's. Items sharing one resources value (a rollout: every node the same
 * spec) are validated and digested once.
 */
export function validateItems(
  items: readonly Readonly<{ node: string; resources: unknown }>[],
  refuse: (i: number, node: string, err: unknown) => void,
): Todo[] {
  const specs = new Map<unknown, Spec>();
  const todo: Todo[] = [];
  const named = new Set<string>();
  for (const [i, item] of items.entries()) {
    try {
      validateNodeId(item.node);
      if (named.has(item.node))
        throw new ConvergeError('CONVERGE_ERR_BAD_REQUEST', `node ${item.node} is named more than once in one batch`);
      named.add(item.node);
      let spec = specs.get(item.resources);
      if (spec === undefined) specs.set(item.resources, (spec = validateSpec({ resources: item.resources })));
      todo.push({ i, node: item.node, spec, specDigest: '', specText: '' });
    } catch (err) {
      refuse(i, item.node, err);
    }
  }
  const digests = new Map<Spec, Readonly<{ digest: string; text: string }>>();
  for (const t of todo) {
    let d = digests.get(t.spec);
    if (d === undefined) digests.set(t.spec, (d = { digest: specDigestOf(t.spec.resources), text: JSON.stringify(t.spec.resources) }));
    t.specDigest = d.digest;
    t.specText = d.text;
  }
  return todo;
}
