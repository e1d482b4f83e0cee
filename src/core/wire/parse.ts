import type { z } from 'zod';
import { ConvergeError } from '../errors.ts';
import { fastAlive, fastReport } from './parseFast.ts';
import { aliveSchema, digestPattern, reportSchema, signedSchema } from './schemas.ts';
import type { Alive, Report, Signed } from './schemas.ts';

export type WireLimits = Readonly<{
  /** Bodies over this many bytes are rejected before parsing (default 256 KiB). */
  maxBytes: number;
  /** Arrays/objects nested deeper than this are rejected before JSON.parse walks them. */
  maxDepth: number;
  /** Arrays/objects holding more entries than this are rejected before JSON.parse builds them. */
  maxEntries: number;
}>;

// maxEntries: a declaration holds at most 10,000 resources (src/core/declaration/declaration.ts), so
// no honest report applies, fails or carries more; a body with tens of thousands of keys stalled
// the whole engine while it was taken in.
export const defaultWireLimits: WireLimits = Object.freeze({ maxBytes: 256 * 1024, maxDepth: 32, maxEntries: 10_000 });

// Not fatal: Go replaces invalid UTF-8 with U+FFFD too. ignoreBOM keeps a leading byte-order
// mark in the text, so JSON.parse refuses it as Go's decoder does ("invalid character 'ï'").
const decoder = new TextDecoder('utf-8', { ignoreBOM: true });

/**
 * Nesting depth and entries per array/object, counted on the raw bytes, outside strings: one
 * pass, one small array, before JSON.parse, so a hostile `[[[[…` never builds a deep structure
 * and a 20,000-key map is never built at all. 'deep', 'wide', or null when within the limits.
 */
export function jsonShapeExceeds(bytes: Uint8Array, maxDepth: number, maxEntries: number): 'deep' | 'wide' | null {
  let depth = 0;
  let inString = false;
  // Commas seen at each open level: n commas separate n + 1 entries. A level's count is reset as
  // it opens, so one array serves every call (a typed array per body showed in the profile).
  if (commaCounts.length < maxDepth + 1) commaCounts = new Uint32Array(maxDepth + 1);
  const commas = commaCounts;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped byte
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x2c) {
      if (depth > 0 && ++commas[depth]! >= maxEntries) return 'wide';
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > maxDepth) return 'deep';
      commas[depth] = 0;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return null;
}

let commaCounts = new Uint32Array(64);

/** Depth only (kept for callers that bound nothing else). */
export const jsonDepthExceeds = (bytes: Uint8Array, maxDepth: number): boolean =>
  jsonShapeExceeds(bytes, maxDepth, Number.MAX_SAFE_INTEGER) === 'deep';

function parseJson(body: Uint8Array, limits: WireLimits): unknown {
  if (body.length > limits.maxBytes) {
    throw new ConvergeError('CONVERGE_ERR_WIRE_TOO_LARGE', `body is ${body.length} bytes; the limit is ${limits.maxBytes}`, {
      details: { bytes: body.length, limit: limits.maxBytes },
    });
  }
  const shape = jsonShapeExceeds(body, limits.maxDepth, limits.maxEntries);
  if (shape === 'deep') throw new ConvergeError('CONVERGE_ERR_WIRE_TOO_DEEP', `body nests deeper than ${limits.maxDepth} levels`);
  if (shape === 'wide') {
    throw new ConvergeError(
      'CONVERGE_ERR_WIRE_TOO_MANY_ENTRIES',
      `body holds an array or object of more than ${limits.maxEntries} entries (applied, failed and carried name at most the resources of one declaration)`,
      { details: { limit: limits.maxEntries } },
    );
  }
  try {
    return JSON.parse(decoder.decode(body));
  } catch (cause) {
    throw new ConvergeError('CONVERGE_ERR_WIRE_NOT_JSON', `body is not JSON: ${(cause as Error).message}`, { cause });
  }
}

/** The limits with the defaults filled in; limits already whole (ingest's, made once) are used as they are. */
const limitsOf = (l: Partial<WireLimits> | undefined): WireLimits =>
  l === undefined
    ? defaultWireLimits
    : l.maxBytes !== undefined && l.maxDepth !== undefined && l.maxEntries !== undefined
      ? (l as WireLimits)
      : { ...defaultWireLimits, ...l };

function describe(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .slice(0, 3)
    .map((i) => `${i.path.length ? i.path.join('.') : '(body)'}: ${i.message}`)
    .join('; ');
}

// The fast path (parseFast.ts): zod's safeParse was most of what parsing a report cost (figures in
// BENCHMARKS.md). It returns zod's own output for the common well-formed body and hands anything
// else to zod, which stays the judge of what is valid and words every rejection
// (test/core/wire/parseFast.property.test.ts).
function check<T extends z.ZodType>(
  schema: T,
  value: unknown,
  what: string,
  requiresNode = false,
  fast?: (v: unknown) => z.output<T> | null,
): z.output<T> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConvergeError('CONVERGE_ERR_WIRE_SCHEMA', `${what} must be a JSON object`);
  }
  if (requiresNode && !Object.hasOwn(value, 'node')) throw new ConvergeError('CONVERGE_ERR_WIRE_NODE_MISSING', `${what} has no node`);
  const quick = fast?.(value);
  if (quick != null) return quick;
  const r = schema.safeParse(value);
  if (!r.success) {
    const base64 = r.error.issues.some((i) => i.code === 'custom' && (i.params as { code?: string } | undefined)?.code === 'base64');
    throw new ConvergeError(
      base64 ? 'CONVERGE_ERR_WIRE_BASE64' : 'CONVERGE_ERR_WIRE_SCHEMA',
      `${what} does not match wire.go: ${describe(r.error.issues)}`,
      { details: { issues: r.error.issues.slice(0, 10) } },
    );
  }
  return r.data;
}

function requireNode(node: string, what: string): void {
  if (node.length === 0) throw new ConvergeError('CONVERGE_ERR_WIRE_NODE_MISSING', `${what} has no node`);
}

export function parseReport(body: Uint8Array, limits?: Partial<WireLimits>): Report {
  const r = check(reportSchema, parseJson(body, limitsOf(limits)), 'report', true, fastReport);
  requireNode(r.node, 'report');
  if (r.declared !== '' && !digestPattern.test(r.declared)) {
    throw new ConvergeError(
      'CONVERGE_ERR_WIRE_DIGEST',
      `declared must be 64 lowercase hex characters, got ${JSON.stringify(r.declared.slice(0, 80))}`,
    );
  }
  // Named field by field: a spread of the checked object was a copy through the generic path.
  return {
    node: r.node,
    applied: r.applied,
    failed: r.failed,
    refused: r.refused,
    carried: r.carried,
    declared: r.declared === '' ? null : r.declared,
  };
}

export function parseAlive(body: Uint8Array, limits?: Partial<WireLimits>): Alive {
  const a = check(aliveSchema, parseJson(body, limitsOf(limits)), 'alive', true, fastAlive);
  requireNode(a.node, 'alive');
  return a;
}

export function parseSigned(body: Uint8Array, limits?: Partial<WireLimits>): Signed {
  return check(signedSchema, parseJson(body, limitsOf(limits)), 'signed');
}

/**
 * Encode `Signed` as Go's encoding/json writes it: field order of the struct, []byte as
 * standard padded base64 (which needs no JSON escaping).
 */
export function encodeSigned(s: Signed): Buffer {
  return Buffer.from(`{"declaration":"${s.declaration.toString('base64')}","signature":"${s.signature.toString('base64')}"}`);
}

// Padded base64 whose unused low bits are zero: what Buffer#toString('base64') writes, so it is
// its own re-encoding. Anything else (whitespace, the URL alphabet, no padding) is decoded first.
const canonicalBase64 = /^[A-Za-z0-9+/]*(?:[AQgw]==|[AEIMQUYcgkosw048]=)?$/;
const isCanonicalBase64 = (text: string): boolean => text.length % 4 === 0 && canonicalBase64.test(text);

/**
 * encodeSigned of the bytes two base64 texts hold (the relay's, from a stored DeclarationSent):
 * the same bytes, written from the texts themselves when they are canonical. Decoding them and
 * encoding them again was four copies of a declaration on the engine thread's heap per send.
 */
export function encodeSignedBase64(declaration: string, signature: string): Buffer {
  if (!isCanonicalBase64(declaration) || !isCanonicalBase64(signature))
    return encodeSigned({ declaration: Buffer.from(declaration, 'base64'), signature: Buffer.from(signature, 'base64') });
  const head = '{"declaration":"';
  const mid = '","signature":"';
  const out = Buffer.allocUnsafe(head.length + declaration.length + mid.length + signature.length + 2);
  let at = out.write(head, 0, 'latin1');
  at += out.write(declaration, at, 'latin1');
  at += out.write(mid, at, 'latin1');
  at += out.write(signature, at, 'latin1');
  out.write('"}', at, 'latin1');
  return out;
}

/** Encode a report as Go would (omitempty, struct field order, `<>&` escaped). For the lab and tests. */
export function encodeReport(r: Report): Buffer {
  const o: Record<string, unknown> = { node: r.node };
  if (r.applied.length) o['applied'] = r.applied;
  if (Object.keys(r.failed).length)
    o['failed'] = Object.fromEntries(Object.entries(r.failed).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  if (r.refused) o['refused'] = r.refused;
  if (r.carried.length) o['carried'] = r.carried;
  if (r.declared) o['declared'] = r.declared;
  return Buffer.from(goEscape(JSON.stringify(o)));
}

export function encodeAlive(a: Alive): Buffer {
  return Buffer.from(goEscape(JSON.stringify({ node: a.node })));
}

/** Go's encoder escapes <, >, & and U+2028/U+2029 inside strings; JSON.stringify does not. */
function goEscape(json: string): string {
  return json.replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
