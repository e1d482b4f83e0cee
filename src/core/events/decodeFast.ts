// The fast version of the zod decode of the node events (upcasters.ts decodeEventData):
// it must equal the schemas in events.ts and liveness.ts (declarationSentData, reportReceivedData,
// aliveSeenData, nodeHeardData, nodeSilentData) and rollouts.ts (rolloutSentData,
// rolloutNodesListedData), which stay the one definition of a valid stored event. A RolloutSent
// lists up to 500 sends: the rollout driver reads each back right after appending it, and zod's
// copy of one was a long turn of its own. A rollout's targets are RolloutNodesListed of 1,000 ids
// each, which the driver's first read of a rollout decodes all at once: 100 of them for 100,000
// nodes took zod most of a 75 ms turn. Liveness transitions are most of a long history's events (docs/design.md §3). It serves the paths that
// decode the whole log (replay, a cold start, the projections), where zod's safeParse was a large
// share of each event's cost, mostly copying objects that were already exactly right. For an input
// it accepts it returns data deep-equal to zod's — the parsed object itself, not a copy, so only
// when it holds no key the schema would strip — and null, "ask zod", for anything else, so a
// malformed event is still refused by zod, with zod's message. The wire's fast path
// (src/core/wire/parseFast.ts) works the same way. test/core/events/decodeFast.property.test.ts
// holds the two equal on generated and broken data.

import type { AliveSeenData, DeclarationSentData, ReportReceivedData } from './events.ts';
import type { NodeHeardData, NodeSilentData } from './liveness.ts';
import { rolloutIdPattern } from './rollouts.ts';
import type { RolloutNodesListedData, RolloutSentData } from './rollouts.ts';

type Plain = Record<string, unknown>;

const isPlainObject = (v: unknown): v is Plain => typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype;

/** 1 for the char codes of a lowercase hex digit. */
const hexDigit = new Uint8Array(0x10000);
for (const ch of '0123456789abcdef') hexDigit[ch.charCodeAt(0)] = 1;

/** events.ts's digest, /^[0-9a-f]{64}$/, as a loop over char codes and a table (the regex took ~1.5× as long). */
export function isDigest(v: unknown): boolean {
  if (typeof v !== 'string' || v.length !== 64) return false;
  for (let i = 0; i < 64; i++) if (hexDigit[v.charCodeAt(i)] !== 1) return false;
  return true;
}

/** Two decimal digits at `i`, or -1. */
function twoDigits(s: string, i: number): number {
  const a = s.charCodeAt(i) - 0x30;
  const b = s.charCodeAt(i + 1) - 0x30;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : -1;
}

/**
 * Date#toISOString's own form, `YYYY-MM-DDTHH:mm:ss.sssZ`, with every field in a range Date.parse
 * reads (it takes day 31 of any month): how the engine writes every time. Date.parse cost about
 * half a microsecond per event on a replay; this is a few comparisons.
 */
export function isPlainIso(s: string): boolean {
  if (s.length !== 24) return false;
  if (s.charCodeAt(4) !== 0x2d || s.charCodeAt(7) !== 0x2d || s.charCodeAt(10) !== 0x54 || s.charCodeAt(13) !== 0x3a) return false;
  if (s.charCodeAt(16) !== 0x3a || s.charCodeAt(19) !== 0x2e || s.charCodeAt(23) !== 0x5a) return false;
  if (twoDigits(s, 0) < 0 || twoDigits(s, 2) < 0 || twoDigits(s, 20) < 0) return false;
  const digit = s.charCodeAt(22) - 0x30;
  if (digit < 0 || digit > 9) return false;
  const month = twoDigits(s, 5);
  const day = twoDigits(s, 8);
  const hour = twoDigits(s, 11);
  const minute = twoDigits(s, 14);
  const second = twoDigits(s, 17);
  return (
    month >= 1 &&
    month <= 12 &&
    day >= 1 &&
    day <= 31 &&
    hour >= 0 &&
    hour <= 23 &&
    minute >= 0 &&
    minute <= 59 &&
    second >= 0 &&
    second <= 59
  );
}

/** zod's `iso` in events.ts: a string Date.parse reads. */
export const isIso = (v: unknown): boolean => typeof v === 'string' && (isPlainIso(v) || !Number.isNaN(Date.parse(v)));
const isNodeName = (v: unknown): boolean => typeof v === 'string' && v.length > 0;
const isCount = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= 1;
const isIndex = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= 0;

export function isStringArray(v: unknown): boolean {
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'string') return false;
  return true;
}

export function isIntArray(v: unknown): boolean {
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) if (!Number.isSafeInteger(v[i])) return false;
  return true;
}

/** src/core/wire's stringMap: a plain object whose values are all strings. */
export function isStringMap(v: unknown): boolean {
  if (!isPlainObject(v)) return false;
  for (const k in v) if (typeof v[k] !== 'string') return false;
  return true;
}

/**
 * Enumerable keys, counted without building an array. For-in also meets inherited enumerable keys
 * (none on Object.prototype unless someone adds one): such a count only comes out too high, and
 * the check then asks zod, so no own-key test per key is needed to stay correct.
 */
function keyCount(v: Plain): number {
  let n = 0;
  for (const _ in v) n++;
  return n;
}

const isNullableString = (v: unknown): boolean => v === null || typeof v === 'string';

export function isTransport(v: unknown): boolean {
  if (!isPlainObject(v)) return false;
  return isNullableString(v.messageId) && typeof v.redelivered === 'boolean' && isNullableString(v.userId) && keyCount(v) === 3;
}

export function isRolloutTag(v: unknown): boolean {
  if (!isPlainObject(v)) return false;
  const rollback = v.rollback !== undefined;
  if (!rollback && 'rollback' in v) return false;
  return (
    typeof v.id === 'string' &&
    rolloutIdPattern.test(v.id) &&
    isCount(v.wave) &&
    (!rollback || v.rollback === true) &&
    keyCount(v) === (rollback ? 3 : 2)
  );
}

export function isSentEarlier(v: unknown): boolean {
  if (!isPlainObject(v)) return false;
  return isCount(v.serial) && isIso(v.sentAt) && keyCount(v) === 2;
}

/** The zod output of declarationSentData for `v`, or null to let zod decide. */
export function fastDeclarationSent(v: unknown): DeclarationSentData | null {
  if (!isPlainObject(v)) return null;
  // A present `rollout: undefined` cannot come out of JSON; `in` keeps the count honest anyway.
  const tagged = v.rollout !== undefined;
  if (!tagged && 'rollout' in v) return null;
  const ok =
    isNodeName(v.node) &&
    isCount(v.serial) &&
    isDigest(v.digest) &&
    isDigest(v.specDigest) &&
    typeof v.declaration === 'string' &&
    typeof v.signature === 'string' &&
    typeof v.keyId === 'string' &&
    isStringArray(v.resourceIds) &&
    isIso(v.sentAt) &&
    (!tagged || isRolloutTag(v.rollout)) &&
    keyCount(v) === (tagged ? 10 : 9);
  return ok ? (v as DeclarationSentData) : null;
}

/** The zod output of reportReceivedData for `v`, or null to let zod decide. */
export function fastReportReceived(v: unknown): ReportReceivedData | null {
  if (!isPlainObject(v)) return null;
  const looked = v.sentEarlier !== undefined;
  if (!looked && 'sentEarlier' in v) return null;
  const ok =
    isNodeName(v.node) &&
    (v.declared === null || isDigest(v.declared)) &&
    isStringArray(v.applied) &&
    isStringMap(v.failed) &&
    typeof v.refused === 'string' &&
    isIntArray(v.carried) &&
    isIso(v.receivedAt) &&
    isTransport(v.transport) &&
    (!looked || v.sentEarlier === null || isSentEarlier(v.sentEarlier)) &&
    keyCount(v) === (looked ? 9 : 8);
  return ok ? (v as ReportReceivedData) : null;
}

/** The zod output of aliveSeenData for `v`, or null to let zod decide. */
export function fastAliveSeen(v: unknown): AliveSeenData | null {
  if (!isPlainObject(v)) return null;
  return isNodeName(v.node) && isIso(v.seenAt) && keyCount(v) === 2 ? (v as AliveSeenData) : null;
}

/** The zod output of nodeHeardData for `v`, or null to let zod decide. */
export function fastNodeHeard(v: unknown): NodeHeardData | null {
  if (!isPlainObject(v)) return null;
  return isNodeName(v.node) && isIso(v.at) && (v.lastSeenBefore === null || isIso(v.lastSeenBefore)) && keyCount(v) === 3
    ? (v as NodeHeardData)
    : null;
}

/** The zod output of nodeSilentData for `v`, or null to let zod decide. */
export function fastNodeSilent(v: unknown): NodeSilentData | null {
  if (!isPlainObject(v)) return null;
  return isNodeName(v.node) && isIso(v.lastSeenAt) && isIso(v.observedAt) && isCount(v.graceMs) && keyCount(v) === 4
    ? (v as NodeSilentData)
    : null;
}

/** rolloutSentData's `restores`: the send whose spec a send under `asOf` carries again. */
function isRestores(v: unknown): boolean {
  if (!isPlainObject(v)) return false;
  return isCount(v.serial) && isDigest(v.digest) && isDigest(v.specDigest) && keyCount(v) === 3;
}

function isRolloutSend(v: unknown): boolean {
  if (!isPlainObject(v)) return false;
  const restores = v.restores !== undefined;
  if (!restores && 'restores' in v) return false;
  return (
    isNodeName(v.node) &&
    isCount(v.serial) &&
    isDigest(v.digest) &&
    (!restores || isRestores(v.restores)) &&
    keyCount(v) === (restores ? 4 : 3)
  );
}

function isRolloutSkip(v: unknown): boolean {
  if (!isPlainObject(v)) return false;
  return isNodeName(v.node) && typeof v.code === 'string' && typeof v.reason === 'string' && keyCount(v) === 3;
}

function isArrayOf(v: unknown, each: (x: unknown) => boolean): boolean {
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) if (!each(v[i])) return false;
  return true;
}

/** The zod output of rolloutSentData for `v`, or null to let zod decide. */
export function fastRolloutSent(v: unknown): RolloutSentData | null {
  if (!isPlainObject(v)) return null;
  const ok =
    typeof v.rollout === 'string' &&
    rolloutIdPattern.test(v.rollout) &&
    isCount(v.wave) &&
    isArrayOf(v.sends, isRolloutSend) &&
    isArrayOf(v.skipped, isRolloutSkip) &&
    isIso(v.sentAt) &&
    keyCount(v) === 5;
  return ok ? (v as RolloutSentData) : null;
}

/** The zod output of rolloutNodesListedData for `v`, or null to let zod decide. */
export function fastRolloutNodesListed(v: unknown): RolloutNodesListedData | null {
  if (!isPlainObject(v)) return null;
  const ok =
    typeof v.rollout === 'string' &&
    rolloutIdPattern.test(v.rollout) &&
    isIndex(v.from) &&
    Array.isArray(v.nodes) &&
    v.nodes.length >= 1 &&
    isArrayOf(v.nodes, isNodeName) &&
    isIso(v.listedAt) &&
    keyCount(v) === 4;
  return ok ? (v as RolloutNodesListedData) : null;
}

/** The fast check for a type, if it has one. */
export const fastDecoders: Readonly<Record<string, ((v: unknown) => unknown) | undefined>> = {
  DeclarationSent: fastDeclarationSent,
  ReportReceived: fastReportReceived,
  AliveSeen: fastAliveSeen,
  NodeHeard: fastNodeHeard,
  NodeSilent: fastNodeSilent,
  RolloutSent: fastRolloutSent,
  RolloutNodesListed: fastRolloutNodesListed,
};
