import { readFile, rename, writeFile } from 'node:fs/promises';
import { foldVersion } from '../../projections/index.ts';
import type { NodeState } from '../../projections/index.ts';
import { ConvergeError } from '../errors.ts';

// Read-model snapshots: the folded states at one position, in a JSON file written atomically
// (temp file + rename) so a crash leaves the old snapshot or the new one, never half of one.
// A snapshot is only a shortcut: it is trusted only if it was made by a fold of the same version
// (projections/foldVersion.ts) and from this store (the event at its position has the same id).
// Anything else is discarded and the runner folds from zero — slower, never wrong.

// 2: object keys starting with `$` are escaped (see replacer); a format-1 file is discarded.
// 3: foldVersion is the number in projections/foldVersion.ts, no longer a hash of the fold's
//    source file (which no build can read, and which a comment edit changed).
export const snapshotFormat = 3;
export { foldVersion };

export type Snapshot = Readonly<{
  format: number;
  foldVersion: number;
  position: bigint;
  /** Id of the event at `position`: ties the snapshot to the store it was made from. */
  eventId: string;
  writtenAt: string;
  states: readonly NodeState[];
}>;

type Json = Record<string, unknown>;

// bigint → {"$big": "n"}, Map → {"$map": [[k, v]…]}: both round-trip exactly. Keys of other
// objects that start with `$` get one more `$`, so data a node chose — a `failed` resource
// named "$big" (wire.go Report.Failed) — is never read back as a tag: a restored model must be
// the fold's state exactly (DESIGN §3: replay and live agree at any position).
const isPlainObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Map);
const replacer = (_k: string, v: unknown): unknown => {
  if (typeof v === 'bigint') return { $big: v.toString() };
  if (v instanceof Map) return { $map: [...(v as Map<unknown, unknown>)] };
  if (isPlainObject(v) && Object.keys(v).some((k) => k.startsWith('$'))) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k.startsWith('$') ? `$${k}` : k, x]));
  }
  return v;
};
const reviver = (_k: string, v: unknown): unknown => {
  if (isPlainObject(v)) {
    const o = v;
    const keys = Object.keys(o);
    if (typeof o.$big === 'string' && keys.length === 1) return BigInt(o.$big);
    if (Array.isArray(o.$map) && keys.length === 1) return new Map(o.$map as [unknown, unknown][]);
    if (keys.some((k) => k.startsWith('$')))
      return Object.fromEntries(Object.entries(o).map(([k, x]) => [k.startsWith('$$') ? k.slice(1) : k, x]));
  }
  return v;
};

export const serializeSnapshot = (s: Snapshot): string => JSON.stringify(s, replacer);

export function parseSnapshot(text: string): Snapshot {
  const v = JSON.parse(text, reviver) as Partial<Snapshot>;
  if (
    v.format !== snapshotFormat ||
    typeof v.position !== 'bigint' ||
    typeof v.eventId !== 'string' ||
    !Array.isArray(v.states) ||
    typeof v.foldVersion !== 'number'
  ) {
    throw new ConvergeError('CONVERGE_ERR_SNAPSHOT_INVALID', 'snapshot file is not a Converge read-model snapshot');
  }
  return v as Snapshot;
}

/** Read a snapshot file; null if there is none. Throws if it exists but cannot be parsed. */
export async function readSnapshot(path: string): Promise<Snapshot | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new ConvergeError('CONVERGE_ERR_SNAPSHOT_INVALID', `cannot read snapshot ${path}: ${(e as Error).message}`, { cause: e });
  }
  try {
    return parseSnapshot(text);
  } catch (e) {
    throw new ConvergeError('CONVERGE_ERR_SNAPSHOT_INVALID', `snapshot ${path} is not valid: ${(e as Error).message}`, { cause: e });
  }
}

/** Write atomically: the serialized text was taken synchronously, so it is one consistent position. */
export async function writeSnapshotText(path: string, text: string): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, text, 'utf8');
  await rename(tmp, path);
}
