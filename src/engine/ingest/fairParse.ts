import type { Delivery } from '../../transport/port.ts';

// Parsing shared fairly between senders. amqplib hands every frame it has buffered to the
// consumer in one go, and parsing a run of wide reports there held the event loop, every other
// node's reports and the timers waiting behind it. So a turn of the event loop parses at most
// `bytesPerTurn` body bytes (and at least one delivery); past that, deliveries wait, in order, for
// later turns. A node's reports are stored in the order they came: nothing overtakes a delivery
// of the same sender that waits. A routine body (one unit of the node budget) of a sender with
// none waiting is parsed at once, so another node's wide reports do not delay it.

/** A body this small (one unit of the node budget, nodeBudget.ts costOf) is never held back for a later turn. */
export const routineBytes = 4096;

export type FairParse = Readonly<{
  /** Parse `d` in this turn, or queue it behind its sender's waiting deliveries or this turn's bytes. */
  offer: (d: Delivery) => void;
  /** Parse waiting deliveries, oldest first, until this turn has parsed `most` bytes (at least one delivery). */
  parseWaiting: (most: number) => void;
  /** Deliveries waiting for a turn. */
  waiting: () => number;
}>;

export function createFairParse(options: Readonly<{ bytesPerTurn: number; parse: (d: Delivery) => void }>): FairParse {
  const { bytesPerTurn, parse } = options;
  /** Deliveries waiting for a turn to be parsed in (oldest first). */
  let unparsed: Delivery[] = [];
  /** Waiting deliveries per sender (user_id; '' for none): a sender's later delivery waits behind them. */
  const waitingBy = new Map<string, number>();
  /** Body bytes parsed in this turn; `turnArmed`: a setImmediate will start the next turn's count. */
  let turnBytes = 0;
  let turnArmed = false;

  function armTurn(): void {
    if (turnArmed) return;
    turnArmed = true;
    setImmediate(nextTurn);
  }

  /** A new turn: parse waiting deliveries up to its bytes, and come back in the next if some are left. */
  function nextTurn(): void {
    turnArmed = false;
    turnBytes = 0;
    parseWaiting(bytesPerTurn);
  }

  function parseNow(d: Delivery): void {
    turnBytes += d.body.length;
    armTurn();
    parse(d);
  }

  function parseWaiting(most: number): void {
    let i = 0;
    while (i < unparsed.length && (turnBytes < most || i === 0)) {
      const d = unparsed[i++]!;
      const sender = d.userId ?? '';
      const left = (waitingBy.get(sender) ?? 1) - 1;
      if (left === 0) waitingBy.delete(sender);
      else waitingBy.set(sender, left);
      parseNow(d);
    }
    unparsed = i === unparsed.length ? [] : unparsed.slice(i);
    if (unparsed.length > 0) armTurn();
  }

  function offer(d: Delivery): void {
    const sender = d.userId ?? '';
    if (waitingBy.has(sender) || (turnBytes >= bytesPerTurn && d.body.length > routineBytes)) {
      unparsed.push(d);
      waitingBy.set(sender, (waitingBy.get(sender) ?? 0) + 1);
      armTurn();
      return;
    }
    parseNow(d);
  }

  return { offer, parseWaiting, waiting: () => unparsed.length };
}
