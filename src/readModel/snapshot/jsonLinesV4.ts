import { z } from 'zod';
import type { NodeState } from '../../../projections/index.ts';
import { arrayColumn, columnChecks, columnNames, sectionNames, SnapshotContentError, tableNames, tableSchemas } from './columns.ts';
import type { Check, ColumnArrays, ColumnName, Columns, SectionName, Tables } from './columns.ts';
import { MissingPartError } from './decodeColumn.ts';
import { createEncoder } from './encoder.ts';

// Format 4, still read (an engine upgraded from it starts warm on the snapshot its predecessor
// wrote): UTF-8 lines, a JSON header, one JSON array per column then per table (the names of
// columns.ts, in its order), a sha256 trailer. Format 5 writes the same columns as binary
// parts. The writer here is kept for the tests that prove format 4 is still read.

// A column is one zod schema run once over the whole array with a plain loop per element: zod's
// per-element schemas (z.array(z.number().int())) cost a call per value. The failing index is in the issue's path.
const column = <T>(c: Check<T>) =>
  z.any().superRefine((v, ctx) => {
    if (!Array.isArray(v)) {
      ctx.addIssue({ code: 'custom', message: `expected an array of ${c.what}` });
      return;
    }
    for (let i = 0; i < v.length; i++) {
      if (!c.ok(v[i])) {
        ctx.addIssue({
          code: 'custom',
          message: `expected ${c.what}, got ${JSON.stringify(v[i])?.slice(0, 80) ?? String(v[i])}`,
          path: [i],
        });
        return;
      }
    }
  }) as unknown as z.ZodType<T[]>;

export const sectionSchemas4 = {
  ...(Object.fromEntries(columnNames.map((name) => [name, column(columnChecks[name] as Check<unknown>)])) as unknown as {
    [K in ColumnName]: z.ZodType<ColumnArrays[K]>;
  }),
  ...tableSchemas,
} satisfies Record<SectionName, z.ZodType>;

export type Sections4 = ColumnArrays & Tables;

export const headerSchema4 = z.strictObject({
  format: z.literal(4),
  foldVersion: z.number().int(),
  position: z.string().regex(/^\d{1,20}$/),
  eventId: z.string().min(1),
  writtenAt: z.string(),
  nodes: z.number().int().min(0),
  sections: z.array(z.string()),
});

/** A whole format-4 file (header, columns, tables, trailer), for the tests that read one. */
export function encodeSnapshot4(
  snap: Readonly<{ foldVersion: number; position: bigint; eventId: string; writtenAt: string; states: readonly NodeState[] }>,
  sha256: (text: string) => string,
): string {
  const header: z.infer<typeof headerSchema4> = {
    format: 4,
    foldVersion: snap.foldVersion,
    position: snap.position.toString(),
    eventId: snap.eventId,
    writtenAt: snap.writtenAt,
    nodes: snap.states.length,
    sections: [...sectionNames],
  };
  const encoder = createEncoder(snap.states, snap.position);
  let body = `${JSON.stringify(header)}\n`;
  for (const name of columnNames) body += `${JSON.stringify(encoder.values(name, 0, snap.states.length))}\n`;
  for (const name of tableNames) body += `${JSON.stringify(encoder.table(name))}\n`;
  return `${body}{"sha256":"${sha256(body)}"}\n`;
}

const newline = 0x0a;

/** Format 4: one JSON line per section, each checked by its zod schema. */
export function readJsonLinesV4(bytes: Buffer, from: number, trailerStart: number): { columns: Columns; tables: Tables } {
  const sections: Partial<Record<string, unknown>> = {};
  let at = from;
  for (const name of sectionNames) {
    const end = bytes.indexOf(newline, at);
    if (end < 0 || end >= trailerStart) throw new MissingPartError(`section ${name}`);
    let value: unknown;
    try {
      value = JSON.parse(bytes.subarray(at, end).toString('utf8'));
    } catch (e) {
      throw new SnapshotContentError(`section ${name} is not JSON: ${(e as Error).message}`);
    }
    const r = sectionSchemas4[name].safeParse(value);
    if (!r.success) {
      const issue = r.error.issues[0];
      const where = issue === undefined ? '' : `[${issue.path.join('][')}]`;
      throw new SnapshotContentError(`${name}${where}: ${issue?.message ?? 'invalid'}`);
    }
    sections[name] = r.data;
    at = end + 1;
  }
  if (at !== trailerStart) throw new SnapshotContentError('snapshot has more sections than its header names');
  const s = sections as Sections4;
  const columns = {} as Record<string, unknown>;
  for (const name of columnNames) columns[name] = arrayColumn(s[name] as ArrayLike<unknown>);
  return { columns: columns as Columns, tables: s };
}
