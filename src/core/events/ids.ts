import * as crypto from 'node:crypto';
import { createHash } from 'node:crypto';

// crypto.hash (one shot) exists from Node 20.12; older 20.x falls back to createHash.
const nativeSha1: (data: Buffer) => Buffer =
  typeof crypto.hash === 'function' ? (data) => crypto.hash('sha1', data, 'buffer') : (data) => createHash('sha1').update(data).digest();

/** Inputs up to this many bytes are hashed by sha1Words below; longer ones by node:crypto. */
const jsSha1Bytes = 183; // three 64-byte blocks with the padding: ids are short names
const words = new Int32Array(80);
const digest = new Int32Array(5);

/**
 * SHA-1 (FIPS 180-4) of `data[0, n)` into `digest`, as five big-endian words, for short inputs.
 * `data` must have room for the padding: `n` rounded up past `n + 9` to a multiple of 64.
 * Every ingested report needs an id: the call into node:crypto (binding, a Buffer for the
 * result) cost ~1.9 µs of the 2.8 µs an id took in `serve`;
 * this loop over two blocks takes about half the time of the whole native call (micro-bench of 50,000 report ids: 1.4 → 0.7 µs an id). The same function: test/core/events/sha1 checks it
 * against node:crypto on generated inputs, and the pinned ids in events.unit.test.ts hold.
 */
export function sha1Words(data: Uint8Array, n: number): Int32Array {
  const blocks = (n + 8 + 64) >>> 6;
  const end = blocks << 6;
  data[n] = 0x80;
  data.fill(0, n + 1, end - 4);
  const bits = n * 8;
  data[end - 4] = bits >>> 24;
  data[end - 3] = bits >>> 16;
  data[end - 2] = bits >>> 8;
  data[end - 1] = bits;
  let h0 = 0x67452301;
  let h1 = 0xefcdab89 | 0;
  let h2 = 0x98badcfe | 0;
  let h3 = 0x10325476;
  let h4 = 0xc3d2e1f0 | 0;
  const w = words;
  for (let b = 0; b < end; b += 64) {
    for (let i = 0; i < 16; i++) {
      const o = b + i * 4;
      w[i] = (data[o]! << 24) | (data[o + 1]! << 16) | (data[o + 2]! << 8) | data[o + 3]!;
    }
    for (let i = 16; i < 80; i++) {
      const x = w[i - 3]! ^ w[i - 8]! ^ w[i - 14]! ^ w[i - 16]!;
      w[i] = (x << 1) | (x >>> 31);
    }
    let a = h0;
    let bb = h1;
    let c = h2;
    let d = h3;
    let e = h4;
    // The four rounds of 20 as four loops: no branch per step.
    for (let i = 0; i < 20; i++) {
      const t = (((a << 5) | (a >>> 27)) + ((bb & c) | (~bb & d)) + e + 0x5a827999 + w[i]!) | 0;
      e = d;
      d = c;
      c = (bb << 30) | (bb >>> 2);
      bb = a;
      a = t;
    }
    for (let i = 20; i < 40; i++) {
      const t = (((a << 5) | (a >>> 27)) + (bb ^ c ^ d) + e + 0x6ed9eba1 + w[i]!) | 0;
      e = d;
      d = c;
      c = (bb << 30) | (bb >>> 2);
      bb = a;
      a = t;
    }
    for (let i = 40; i < 60; i++) {
      const t = (((a << 5) | (a >>> 27)) + ((bb & c) | (bb & d) | (c & d)) + e - 0x70e44324 + w[i]!) | 0;
      e = d;
      d = c;
      c = (bb << 30) | (bb >>> 2);
      bb = a;
      a = t;
    }
    for (let i = 60; i < 80; i++) {
      const t = (((a << 5) | (a >>> 27)) + (bb ^ c ^ d) + e - 0x359d3e2a + w[i]!) | 0;
      e = d;
      d = c;
      c = (bb << 30) | (bb >>> 2);
      bb = a;
      a = t;
    }
    h0 = (h0 + a) | 0;
    h1 = (h1 + bb) | 0;
    h2 = (h2 + c) | 0;
    h3 = (h3 + d) | 0;
    h4 = (h4 + e) | 0;
  }
  digest[0] = h0;
  digest[1] = h1;
  digest[2] = h2;
  digest[3] = h3;
  digest[4] = h4;
  return digest;
}

/** The first 16 bytes of SHA-1 of `data[0, n)`; `data` has room for the padding when n ≤ jsSha1Bytes. */
function sha1First16(data: Buffer, n: number): Uint8Array {
  if (n > jsSha1Bytes) return nativeSha1(data.subarray(0, n));
  const h = sha1Words(data, n);
  const out = first16;
  for (let i = 0; i < 4; i++) {
    const v = h[i]!;
    out[i * 4] = v >>> 24;
    out[i * 4 + 1] = (v >>> 16) & 0xff;
    out[i * 4 + 2] = (v >>> 8) & 0xff;
    out[i * 4 + 3] = v & 0xff;
  }
  return out;
}
const first16 = new Uint8Array(16);

// docs/design.md §2: event ids are deterministic so a retried append is a no-op in every store.
// They are RFC 4122 version-5 UUIDs (SHA-1, name-based) because EventStoreDB requires UUIDs.

/** Converge's namespace for name-based ids (a fixed random UUID, chosen once). */
export const convergeNamespace = '6f1d7c2e-9a4b-4c8e-8f3a-2b5d9e0c1a47';

const namespaceBytes = new Map<string, Buffer>();
const nsBytes = (namespace: string): Buffer => {
  let b = namespaceBytes.get(namespace);
  if (b === undefined) namespaceBytes.set(namespace, (b = Buffer.from(namespace.replace(/-/g, ''), 'hex')));
  return b;
};
const convergeNs = nsBytes(convergeNamespace);
const hexDigits = Buffer.from('0123456789abcdef', 'latin1');
const idText = Buffer.alloc(36);
/** Namespace bytes then the name (and SHA-1's padding), hashed in one call; reused because ids are made one at a time. */
let scratch = Buffer.allocUnsafe(1024);

// Every report ingested needs one of these, so it is on the ingest hot path. One-shot
// crypto.hash over a reused buffer and a byte-to-hex table instead of createHash().update()
// twice, a fresh namespace Buffer and hex slicing: 2.4 → 1.2 µs an id (micro-bench of 50,000
// report ids, Node 20). The bytes hashed, and so every id ever stored, are unchanged
// (test/core/events/events.unit.test.ts pins values made by the earlier code).
export function uuidV5(name: string, namespace: string = convergeNamespace): string {
  const ns = namespace === convergeNamespace ? convergeNs : nsBytes(namespace);
  const max = ns.length + name.length * 3 + 72; // UTF-8 needs at most 3 bytes per UTF-16 unit; then the padding
  if (max > scratch.length) scratch = Buffer.allocUnsafe(Math.max(max, scratch.length * 2));
  ns.copy(scratch, 0);
  const n = ns.length + scratch.write(name, ns.length, 'utf8');
  const h = sha1First16(scratch, n);
  // The 36 characters written as bytes and made one flat string: built by concatenating 20 hex
  // pairs it was a rope, flattened again by every Set, Map and SQLite bind it met downstream
  // (micro-bench: 1.6–2.1 → 0.5–0.8 µs an id with its Set.add).
  const out = idText;
  let o = 0;
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) out[o++] = 0x2d; // '-'
    const v = i === 6 ? (h[6]! & 0x0f) | 0x50 : i === 8 ? (h[8]! & 0x3f) | 0x80 : h[i]!;
    out[o++] = hexDigits[v >> 4]!;
    out[o++] = hexDigits[v & 0x0f]!;
  }
  return out.toString('latin1', 0, 36);
}

/** Same node + serial → same id: two sends cannot both take one serial, and a retry is a no-op. */
export const declarationSentId = (node: string, serial: number): string => uuidV5(`DeclarationSent/${node}/${serial}`);

/**
 * Same message → same id. The broker's message id names a message when the node set one;
 * otherwise the body's own hash does (a node that repeats a report byte for byte says nothing new).
 */
export const reportReceivedId = (node: string, messageId: string | null, body: Uint8Array): string =>
  messageId !== null && messageId !== ''
    ? uuidV5(`ReportReceived/${node}/msg/${messageId}`)
    : uuidV5(`ReportReceived/${node}/sha256/${createHash('sha256').update(body).digest('hex')}`);

/** Alive is coalesced per node and resolution window, so the node + seenAt names it. */
export const aliveSeenId = (node: string, seenAt: string): string => uuidV5(`AliveSeen/${node}/${seenAt}`);

/** A node heard again: named by the node and the time it was heard, so a retried append is a no-op. */
export const nodeHeardId = (node: string, at: string): string => uuidV5(`NodeHeard/${node}/${at}`);

/** A node gone silent: named by the node and its last-seen time, so two engines (or a restart) observing the same silence write one event. */
export const nodeSilentId = (node: string, lastSeenAt: string): string => uuidV5(`NodeSilent/${node}/${lastSeenAt}`);

/** An observation span's start or stop, named by the engine, the type and the time. */
export const observationEventId = (engine: string, type: string, at: string): string => uuidV5(`${type}/${engine}/${at}`);

/**
 * A rollout's send to a node: named by the rollout and the node, not the serial, so
 * a driver that retries after a crash or a lost reply, from however stale a view, cannot record
 * a second declaration from the same rollout for that node — the store keeps the first
 * (a retry whose events are all stored is a no-op, test/contracts).
 */
export const rolloutSendId = (node: string, rollout: string): string => uuidV5(`DeclarationSent/${node}/rollout/${rollout}`);

/** A rollout's rollback send to a node: one per rollout and node, as its send is (docs/design.md §8, "Rollback"). */
export const rollbackSendId = (node: string, rollout: string): string => uuidV5(`DeclarationSent/${node}/rollback/${rollout}`);

/**
 * A rollout event, named by its rollout, its type and what makes it unique in the stream: the
 * wave for wave events, the list's offset for node lists, and for everything else the stream
 * revision the decision was taken at. Two drivers taking the same decision write the same id.
 */
export const rolloutEventId = (rollout: string, type: string, key: string | number | bigint): string =>
  uuidV5(`${type}/${rollout}/${String(key)}`);
