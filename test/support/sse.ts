/** One server-sent event as the API writes it (`id:`, `event:`, `data:` as JSON). */
export type SseEvent<Data = Record<string, unknown>> = { id: string; event: string; data: Data };

/**
 * Read server-sent events from a fetch response until `until` holds for those read so far (or the
 * stream ends), then cancel the stream. Comment lines (`: ping`) are skipped.
 */
export async function readSse<Data>(res: Response, until: (events: readonly SseEvent<Data>[]) => boolean): Promise<SseEvent<Data>[]> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  const out: SseEvent<Data>[] = [];
  let buf = '';
  while (!until(out)) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const fields = new Map(
        block
          .split('\n')
          .filter((l) => !l.startsWith(':') && l.includes(':'))
          .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trimStart()]),
      );
      const event = fields.get('event');
      if (event !== undefined) out.push({ id: fields.get('id') ?? '', event, data: JSON.parse(fields.get('data') ?? 'null') as Data });
    }
  }
  await reader.cancel();
  return out;
}
