import { createHash } from 'node:crypto';
import { z } from 'zod';
import { ConvergeError } from '../errors.ts';

// docs/design.md#declaration-bytes-digest-signature: the declaration is UTF-8 JSON the engine writes once and never re-encodes.
// `serial` grows by one per send so a re-sent identical spec (A, B, A) gets a new digest.

const portSchema = z.number().int().min(1).max(65535);

/** One resource: an `id`, optional `ports`, everything else opaque and kept verbatim. */
export const resourceSchema = z.looseObject({
  id: z.string({ error: 'resource id must be a string' }).min(1, 'resource id must not be empty'),
  ports: z.array(portSchema).optional(),
});

// Strict at the top level: a misspelt field (`resource`, `resourcez`) was dropped and the rest
// sent, which reads as accepted. Resources stay loose: their other fields are the node's.
export const specSchema = z.strictObject({
  resources: z.array(resourceSchema).max(10_000),
});

export type Resource = z.infer<typeof resourceSchema>;
export type Spec = Readonly<{ resources: readonly Resource[] }>;

export type DeclarationInput = Readonly<{ node: string; serial: number; issued: Date | string; resources: readonly Resource[] }>;

/** What a declaration says, read back from its bytes. */
export const declarationSchema = z.looseObject({
  node: z.string().min(1),
  serial: z.number().int().min(1),
  issued: z.string(),
  resources: z.array(resourceSchema),
});
export type Declaration = z.infer<typeof declarationSchema>;

/** Validate a spec a user or program asked us to send; throws with a clear code. */
export function validateSpec(input: unknown): Spec {
  const r = specSchema.safeParse(input);
  if (!r.success) {
    const msg = r.error.issues
      .slice(0, 3)
      .map((i) => `${i.path.join('.') || '(spec)'}: ${i.message}`)
      .join('; ');
    throw new ConvergeError('CONVERGE_ERR_SPEC_INVALID', `declaration spec is not valid: ${msg}`, {
      details: { issues: r.error.issues.slice(0, 10) },
    });
  }
  const seen = new Set<string>();
  for (const res of r.data.resources) {
    if (seen.has(res.id)) {
      throw new ConvergeError('CONVERGE_ERR_SPEC_DUPLICATE_ID', `resource id ${JSON.stringify(res.id)} appears more than once`, {
        details: { id: res.id },
      });
    }
    seen.add(res.id);
  }
  return r.data;
}

/** Ports a spec asks for, by resource id. */
export function requestedPorts(spec: Spec): ReadonlyMap<number, string> {
  const m = new Map<number, string>();
  for (const r of spec.resources) for (const p of r.ports ?? []) m.set(p, r.id);
  return m;
}

/** Refuse a spec that assigns a port the node says it carries (docs/design.md#3-what-caught-up-means-the-fold-in-projections). */
export function checkCarriedPorts(spec: Spec, carried: readonly number[]): void {
  const wanted = requestedPorts(spec);
  const clash = carried.filter((p) => wanted.has(p));
  if (clash.length > 0) {
    const detail = clash.map((p) => `${p} (resource ${JSON.stringify(wanted.get(p))})`).join(', ');
    throw new ConvergeError('CONVERGE_ERR_PORT_CARRIED', `port ${detail} is carried by the node itself; assign another`, {
      details: { ports: clash },
    });
  }
}

const isoSeconds = (d: Date): string => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

/** Write the declaration bytes. Called once per send; the bytes are then stored and never rebuilt. */
export function buildDeclaration(input: DeclarationInput): Buffer {
  if (!Number.isSafeInteger(input.serial) || input.serial < 1) {
    throw new ConvergeError('CONVERGE_ERR_SPEC_INVALID', `serial must be a positive integer, got ${input.serial}`);
  }
  const spec = validateSpec({ resources: input.resources });
  const issued = typeof input.issued === 'string' ? input.issued : isoSeconds(input.issued);
  return Buffer.from(JSON.stringify({ node: input.node, serial: input.serial, issued, resources: spec.resources }), 'utf8');
}

/** docs/design.md §1: lowercase hex sha256 of the exact bytes. */
export const digestOf = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/**
 * JSON with every object's keys sorted (by UTF-16 code units, as Array.prototype.sort compares),
 * no whitespace, arrays in order: one text per value, whatever order its keys were written in.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v === undefined ? null : v)).join(',')}]`;
  const o = value as Record<string, unknown>;
  const keys = Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(',')}}`;
}

/**
 * docs/design.md §2: the spec digest, lowercase hex sha256 of the canonical JSON of the resources alone,
 * sorted by id (ids are unique in a declaration, and a spec is the set of resources it names).
 * A declaration's own digest covers the node id, serial and time, so it is unique per send; the
 * spec digest is what every node sent the same resources shares (cohorts, rollouts). It only
 * groups: caught up stays the equality of declaration digests (docs/design.md §3).
 */
export function specDigestOf(resources: readonly Resource[]): string {
  const sorted = [...resources].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return createHash('sha256').update(canonicalJson(sorted), 'utf8').digest('hex');
}

/** Parse declaration bytes as received (after verifying them, never before). */
export function readDeclaration(bytes: Uint8Array): Declaration {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch (cause) {
    throw new ConvergeError('CONVERGE_ERR_DECLARATION_INVALID', 'declaration bytes are not JSON', { cause });
  }
  const r = declarationSchema.safeParse(value);
  if (!r.success) {
    throw new ConvergeError(
      'CONVERGE_ERR_DECLARATION_INVALID',
      `declaration does not match docs/design.md §1: ${r.error.issues[0]?.message ?? ''}`,
    );
  }
  return r.data;
}
