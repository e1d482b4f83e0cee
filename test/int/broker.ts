import { randomBytes } from 'node:crypto';
import pino from 'pino';

export { createBrokerLab as createLab, withBroker } from '../support/brokerLab.ts';
export type { BrokerLab as Lab } from '../support/brokerLab.ts';

export const logger = pino({ level: process.env['LOG_LEVEL'] ?? 'silent' });

export const uniqueTag = (): string => randomBytes(3).toString('hex');

export async function until<T>(
  what: string,
  f: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
