import { ConvergeError } from '../errors.ts';

/**
 * Node ids become a broker user name, a queue name (`node.<id>`), a routing key, a stream name
 * (`node-<id>`) and part of permission regexes. A conservative charset keeps every one of those
 * unambiguous: lowercase letters and digits, then `.`, `_`, `-`; at most 63 characters (a DNS
 * label's length, so a host name fits). No `*`, `#` (topic wildcards), no `/` (URL paths of the
 * management API), no whitespace or control characters.
 */
export const nodeIdPattern = /^[a-z0-9][a-z0-9._-]{0,62}$/;

export function validateNodeId(id: unknown): string {
  if (typeof id !== 'string' || !nodeIdPattern.test(id)) {
    const shown = typeof id === 'string' ? JSON.stringify(id.slice(0, 80)) : typeof id;
    throw new ConvergeError('CONVERGE_ERR_NODE_ID_INVALID', `node id ${shown} does not match ${nodeIdPattern.source}`);
  }
  return id;
}

/** Escape a string for use as a literal inside an Erlang `re` (PCRE) pattern. */
export const escapeRegex = (s: string): string => s.replace(/[\\^$.|?*+()[\]{}-]/g, '\\$&');
