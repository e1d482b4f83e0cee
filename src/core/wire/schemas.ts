import { z } from 'zod';

// Zod schemas of the node-side structs in test/fixtures/node-side/wire.go (the Go node's own structs), reading JSON as Go's
// encoding/json writes it (docs/design.md §1):
// - `omitempty` fields may be absent; Go also decodes an explicit `null` into a nil slice/map
//   and `""` is what an omitted string means, so absent, null and empty all read as empty.
// - unknown fields are ignored (zod objects strip them, as Go's decoder skips them);
// - a wrong type is an error (Go's decoder fails with UnmarshalTypeError).
// Not emulated: Go's case-insensitive key matching. Go's encoder only ever writes the tag
// names, and accepting `"NODE"` would widen what a hostile body can smuggle past review.

export const digestPattern = /^[0-9a-f]{64}$/;
// Go's StdEncoding: standard alphabet, padded; the length is a multiple of four.
const base64Pattern = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

// `"node": null` decodes to "" in Go, which the parser then rejects as missing.
const nodeId = z
  .string({ error: 'node must be a string' })
  .nullable()
  .transform((v) => v ?? '');

/** Optional-with-omitempty: absent and null read as `fallback`. */
const omitEmpty = <T extends z.ZodType>(schema: T, fallback: () => z.output<T>) =>
  schema.nullish().transform((v) => (v ?? fallback()) as z.output<T>);

/**
 * Go's map[string]string, kept as JSON.parse built it rather than copied: zod's record copies
 * by assignment, and assigning a "__proto__" key sets the copy's prototype instead — a failed
 * resource of that name vanished from the stored report (node data round-trips
 * exactly). The check is one pass, like the record's.
 */
export const stringMap = z.custom<Record<string, string>>(
  (v) => {
    if (typeof v !== 'object' || v === null || Object.getPrototypeOf(v) !== Object.prototype) return false;
    for (const k in v) if (typeof (v as Record<string, unknown>)[k] !== 'string') return false;
    return true;
  },
  { message: 'expected an object whose values are all strings' },
);

/** A TCP/UDP port a host can hold (Go's []int says nothing of range; the engine does). */
export const port = z.number().int('ports are whole numbers').min(1, 'ports are 1 to 65535').max(65535, 'ports are 1 to 65535');

export const aliveSchema = z.object({ node: nodeId });

export const reportSchema = z.object({
  node: nodeId,
  applied: omitEmpty(z.array(z.string()), () => []),
  failed: omitEmpty(stringMap, () => ({})),
  refused: omitEmpty(z.string(), () => ''),
  // Go's []int: integers only (1.5 is an UnmarshalTypeError there too), and ports at that.
  carried: omitEmpty(z.array(port), () => []),
  declared: omitEmpty(z.string(), () => ''),
});

const goBytes = z
  .string()
  .nullish()
  .transform((v) => v ?? '')
  .refine((v) => base64Pattern.test(v), { message: 'not standard padded base64', params: { code: 'base64' } })
  .transform((v) => Buffer.from(v, 'base64'));

export const signedSchema = z.object({ declaration: goBytes, signature: goBytes });

/** A report as the engine uses it: `declared` is a digest or null (legacy, absent). */
export type Report = Readonly<{
  node: string;
  applied: readonly string[];
  failed: Readonly<Record<string, string>>;
  refused: string;
  carried: readonly number[];
  declared: string | null;
}>;
export type Alive = Readonly<{ node: string }>;
export type Signed = Readonly<{ declaration: Buffer; signature: Buffer }>;
