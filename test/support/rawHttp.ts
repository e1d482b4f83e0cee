import { connect } from 'node:net';

// A client that announces a body and sends only the start of it, the way a slow or hostile
// uploader does. What the server answers before the rest arrives shows whether it read (and
// waited for) the body before deciding.

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

export type UploadAnswer = Readonly<{
  /** 0: the connection ended without an answer (a server that closes mid-upload may reset it). */
  status: number;
  contentType: string | null;
  /** Bytes of the body written to the socket before the answer came or the connection ended. */
  sentBytes: number;
  closedByServer: boolean;
}>;

/**
 * A client that announces `declaredBytes` and writes the body as fast as the socket takes it,
 * stopping at the first byte of an answer: what a hostile uploader does.
 */
export async function fullUpload(
  base: string,
  request: Readonly<{ method: string; path: string; headers: Record<string, string>; declaredBytes: number }>,
): Promise<UploadAnswer> {
  const url = new URL(base);
  const socket = connect({ host: url.hostname, port: Number(url.port) });
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  let sentBytes = 0;
  let answered = false;
  let closedByServer = false;
  const received: Buffer[] = [];
  await new Promise<void>((resolve) => {
    const closed = (): void => {
      closedByServer = true;
      resolve();
    };
    socket.once('connect', () => {
      socket.write(
        [
          `${request.method} ${request.path} HTTP/1.1`,
          `host: ${url.host}`,
          `content-length: ${request.declaredBytes}`,
          ...Object.entries(request.headers).map(([k, v]) => `${k}: ${v}`),
          '',
          '',
        ].join('\r\n'),
      );
      const pump = (): void => {
        while (!answered && !socket.destroyed && sentBytes < request.declaredBytes) {
          const n = Math.min(chunk.length, request.declaredBytes - sentBytes);
          sentBytes += n;
          if (!socket.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
            socket.once('drain', pump);
            return;
          }
        }
      };
      pump();
    });
    socket.on('data', (c: Buffer) => {
      answered = true;
      received.push(c);
    });
    socket.once('end', closed).once('close', closed).once('error', closed);
    setTimeout(resolve, 10_000).unref();
  });
  socket.destroy();
  const head = Buffer.concat(received).toString('latin1');
  return {
    status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0),
    contentType: /\r\ncontent-type: *([^\r]*)/i.exec(head)?.[1] ?? null,
    sentBytes,
    closedByServer,
  };
}
