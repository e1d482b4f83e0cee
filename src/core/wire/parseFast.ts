// The fast version of parse.ts's zod check of a report and an alive: it must equal the zod
// schemas in schemas.ts (reportSchema, aliveSchema), which stay the one definition of a valid
// body. For an input it accepts it returns exactly what zod returns; for anything it is not sure
// of it returns null — "ask zod" — so a rejection and its message still come from zod.
// test/core/wire/parseFast.property.test.ts holds the two equal on generated and hostile bodies.

type Plain = Record<string, unknown>;

const isPlainObject = (v: unknown): v is Plain => typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype;

function stringArray(v: unknown): string[] | null {
  if (!Array.isArray(v)) return null;
  for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'string') return null;
  return v as string[];
}

function portArray(v: unknown): number[] | null {
  if (!Array.isArray(v)) return null;
  for (let i = 0; i < v.length; i++) {
    const p = v[i] as unknown;
    if (!Number.isInteger(p) || (p as number) < 1 || (p as number) > 65535) return null;
  }
  return v as number[];
}

function stringRecord(v: unknown): Record<string, string> | null {
  if (!isPlainObject(v)) return null;
  for (const k in v) if (typeof v[k] !== 'string') return null;
  return v as Record<string, string>;
}

/** The zod output of reportSchema for `v`, or null to let zod decide. Arrays and the record are the parsed ones, not copies. */
export function fastReport(v: unknown): {
  node: string;
  applied: string[];
  failed: Record<string, string>;
  refused: string;
  carried: number[];
  declared: string;
} | null {
  if (!isPlainObject(v)) return null;
  const { node, applied, failed, refused, carried, declared } = v;
  if (typeof node !== 'string' && node !== null) return null;
  const a = applied == null ? [] : stringArray(applied);
  const f = failed == null ? {} : stringRecord(failed);
  const c = carried == null ? [] : portArray(carried);
  if (a === null || f === null || c === null) return null;
  if (refused != null && typeof refused !== 'string') return null;
  if (declared != null && typeof declared !== 'string') return null;
  return { node: node ?? '', applied: a, failed: f, refused: refused ?? '', carried: c, declared: declared ?? '' };
}

/** The zod output of aliveSchema for `v`, or null to let zod decide. */
export function fastAlive(v: unknown): { node: string } | null {
  if (!isPlainObject(v)) return null;
  const node = v['node'];
  if (typeof node !== 'string' && node !== null) return null;
  return { node: node ?? '' };
}
