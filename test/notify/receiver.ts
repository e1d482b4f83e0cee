import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';

// A webhook receiver for the notification tests: node:http on 127.0.0.1:0, keeping every request.
// `down` answers 503; `hold` keeps each request waiting until `release` (a slow receiver).

export type Received = Readonly<{
  headers: IncomingHttpHeaders;
  body: string;
  json: { id: string; data: { count: number; notifications: { id: string; node: string | null; trigger: string; position: string }[] } };
}>;

export type Receiver = {
  url: string;
  received: Received[];
  down: boolean;
  hold: boolean;
  /** Requests that arrived (answered or not). */
  attempts: number;
  release: () => void;
  close: () => Promise<void>;
};

export async function startReceiver(): Promise<Receiver> {
  const held: (() => void)[] = [];
  const r: Receiver = {
    url: '',
    received: [],
    down: false,
    hold: false,
    attempts: 0,
    release: () => {
      for (const h of held.splice(0)) h();
    },
    close: async () => {
      r.release();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      r.attempts++;
      const body = Buffer.concat(chunks).toString('utf8');
      const answer = (): void => {
        if (r.down) {
          res.writeHead(503).end('down');
          return;
        }
        r.received.push({ headers: req.headers, body, json: JSON.parse(body) as Received['json'] });
        res.writeHead(200).end('ok');
      };
      if (r.hold) held.push(answer);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const a = server.address();
  if (a === null || typeof a === 'string') throw new Error('no address');
  r.url = `http://127.0.0.1:${a.port}/hook`;
  return r;
}
