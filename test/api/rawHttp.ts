import { connect } from 'node:net';

// A client that announces a body and sends only the start of it, the way a slow or hostile
// uploader does. What the server answers before the rest arrives shows whether it read (and
// waited for) the body before deciding (issue 13 item 5).

export type PartialUploadAnswer = Readonly<{
  status: number;
  headers: ReadonlyMap<string, string>;
  body: string;
  /** Bytes of the body this client had written when the answer arrived. */
  sentBytes: number;
  /** The server closed the connection (after answering, or without) instead of waiting for the rest. */
  closedByServer: boolean;
}>;

export async function partialUpload(
  base: string,
  request: Readonly<{ method: string; path: string; headers: Record<string, string>; declaredBytes: number; sendBytes: number }>,
): Promise<PartialUploadAnswer> {
  const url = new URL(base);
  const socket = connect({ host: url.hostname, port: Number(url.port) });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const head = [
    `${request.method} ${request.path} HTTP/1.1`,
    `host: ${url.host}`,
    `content-length: ${request.declaredBytes}`,
    ...Object.entries(request.headers).map(([k, v]) => `${k}: ${v}`),
    '',
    '',
  ].join('\r\n');
  socket.write(head);
  const sentBytes = Math.min(request.sendBytes, request.declaredBytes);
  socket.write(Buffer.alloc(sentBytes, 0x20)); // spaces: valid JSON whitespace, never a complete body

  const chunks: Buffer[] = [];
  let closedByServer = false;
  await new Promise<void>((resolve) => {
    socket.on('data', (c: Buffer) => chunks.push(c));
    // FIN or RST: a server that closes with our unsent bytes still in flight may reset.
    const closed = (): void => {
      closedByServer = true;
      resolve();
    };
    socket.once('end', closed).once('close', closed).once('error', closed);
    // A server that waits for the whole body never answers; give up rather than hang the suite
    // (status 0 then says so). Not a measurement: an answer that comes at all comes at once.
    setTimeout(resolve, 10_000).unref();
    // A server that keeps the connection open after a complete answer has not closed it; stop
    // listening once the answer is whole so the test reports that instead of hanging.
    socket.on('data', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: *(\d+)/i.exec(text)?.[1];
      if (end >= 0 && length !== undefined && text.length >= end + 4 + Number(length)) setTimeout(resolve, 1_000).unref();
    });
  });
  socket.destroy();

  const text = Buffer.concat(chunks).toString('utf8');
  const end = text.indexOf('\r\n\r\n');
  const [statusLine = '', ...lines] = text.slice(0, Math.max(end, 0)).split('\r\n');
  const headers = new Map(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.split(' ')[1] ?? 0), headers, body: text.slice(end + 4), sentBytes, closedByServer };
}
