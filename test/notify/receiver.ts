import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import { performance } from 'node:perf_hooks';

// A webhook receiver for the notification tests: node:http on 127.0.0.1:0, keeping every request.
// `down` answers 503; `hold` keeps each request waiting until `release`; `holdMs` answers each
// request no sooner than that long after it arrived (a slow receiver; with `hold`, both must pass).

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
  holdMs: number;
  /** Requests that arrived (answered or not). */
  attempts: number;
  /** Requests that arrived and have not been answered yet. */
  waiting: number;
  release: () => void;
  close: () => Promise<void>;
};

export async function startReceiver(): Promise<Receiver> {
  const held: (() => void)[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const r: Receiver = {
    url: '',
    received: [],
    down: false,
    hold: false,
    holdMs: 0,
    attempts: 0,
    waiting: 0,
    release: () => {
      for (const h of held.splice(0)) h();
    },
    close: async () => {
      r.holdMs = 0;
      r.release();
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      r.attempts++;
      r.waiting++;
      const arrived = performance.now();
      const body = Buffer.concat(chunks).toString('utf8');
      const answer = (): void => {
        r.waiting--;
        if (r.down) {
          res.writeHead(503).end('down');
          return;
        }
        r.received.push({ headers: req.headers, body, json: JSON.parse(body) as Received['json'] });
        res.writeHead(200).end('ok');
      };
      const go = (): void => {
        const left = r.holdMs - (performance.now() - arrived);
        if (left > 0) {
          const t = setTimeout(() => {
            timers.delete(t);
            answer();
          }, left);
          timers.add(t);
        } else answer();
      };
      if (r.hold) held.push(go);
      else go();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const a = server.address();
  if (a === null || typeof a === 'string') throw new Error('no address');
  r.url = `http://127.0.0.1:${a.port}/hook`;
  return r;
}
