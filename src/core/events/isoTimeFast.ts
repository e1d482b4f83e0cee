// The fast version of Date.parse and Date#toISOString for the engine's own times: isoMs must
// equal Date.parse on every text Date#toISOString writes back exactly (and read no other text),
// isoText must equal `new Date(ms).toISOString()`. test/core/events/isoTimeFast.property.test.ts
// holds them equal in both directions. The bulk folds (projections/node/nodeStateFast.ts) keep a time as
// these milliseconds instead of the event's own string: a replay kept each event's fresh time
// strings alive in its working states, and the young-generation GC spent its time copying them.

/** Days from 1970-01-01 to the civil date (proleptic Gregorian; H. Hinnant's days_from_civil). */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const mp = (month + 9) % 12;
  const doy = Math.floor((153 * mp + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

const daysIn = (year: number, month: number): number =>
  month === 2
    ? year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
      ? 29
      : 28
    : month === 4 || month === 6 || month === 9 || month === 11
      ? 30
      : 31;

/** The last valid date isoMs read (YYYYMMDD) and its days since 1970-01-01. */
let lastDate = -1;
let lastDays = 0;

/** The digit at `i` (0-9), or a value past 9 for anything else. */
const digit = (s: string, i: number): number => (s.charCodeAt(i) - 0x30) >>> 0;

/**
 * The milliseconds of `s` when `new Date(ms).toISOString() === s` (and so Date.parse(s) === ms):
 * `YYYY-MM-DDTHH:mm:ss.sssZ`, years 0000–9999, a day its month has. NaN for any other text, which
 * the fold then keeps as text (test/core/events/isoTimeFast.property.test.ts holds both directions).
 */
export function isoMs(s: string): number {
  if (s.length !== 24) return NaN;
  if (s.charCodeAt(4) !== 0x2d || s.charCodeAt(7) !== 0x2d || s.charCodeAt(10) !== 0x54 || s.charCodeAt(13) !== 0x3a) return NaN;
  if (s.charCodeAt(16) !== 0x3a || s.charCodeAt(19) !== 0x2e || s.charCodeAt(23) !== 0x5a) return NaN;
  const y0 = digit(s, 0);
  const y1 = digit(s, 1);
  const y2 = digit(s, 2);
  const y3 = digit(s, 3);
  const mo0 = digit(s, 5);
  const mo1 = digit(s, 6);
  const d0 = digit(s, 8);
  const d1 = digit(s, 9);
  const h0 = digit(s, 11);
  const h1 = digit(s, 12);
  const mi0 = digit(s, 14);
  const mi1 = digit(s, 15);
  const s0 = digit(s, 17);
  const s1 = digit(s, 18);
  const f0 = digit(s, 20);
  const f1 = digit(s, 21);
  const f2 = digit(s, 22);
  if (y0 > 9 || y1 > 9 || y2 > 9 || y3 > 9 || mo0 > 9 || mo1 > 9 || d0 > 9 || d1 > 9 || h0 > 9 || h1 > 9) return NaN;
  if (mi0 > 9 || mi1 > 9 || s0 > 9 || s1 > 9 || f0 > 9 || f1 > 9 || f2 > 9) return NaN;
  const year = y0 * 1000 + y1 * 100 + y2 * 10 + y3;
  const month = mo0 * 10 + mo1;
  const day = d0 * 10 + d1;
  const hour = h0 * 10 + h1;
  const minute = mi0 * 10 + mi1;
  const second = s0 * 10 + s1;
  if (hour > 23 || minute > 59 || second > 59) return NaN;
  // A log's times come in order, most on the day before: the day's count is kept for the next.
  const date = year * 10_000 + month * 100 + day;
  if (date !== lastDate) {
    if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return NaN;
    lastDays = daysFromCivil(year, month, day);
    lastDate = date;
  }
  return lastDays * 86_400_000 + hour * 3_600_000 + minute * 60_000 + second * 1000 + f0 * 100 + f1 * 10 + f2;
}

/** The last day isoText wrote (days since 1970-01-01) and the char codes of its `YYYY-MM-DD`. */
let textDay = NaN;
const dayCodes: number[] = [];
const d0 = 0x30;

/**
 * The text isoMs read `ms` from: Date#toISOString's, written from char codes (publishing a large
 * replay makes hundreds of thousands of them, and `new Date(ms).toISOString()` showed).
 */
export function isoText(ms: number): string {
  if (!(ms >= 0 && ms < 253_402_300_800_000) || !Number.isInteger(ms)) return new Date(ms).toISOString();
  const day = Math.floor(ms / 86_400_000);
  if (day !== textDay) {
    const text = new Date(day * 86_400_000).toISOString();
    for (let i = 0; i < 10; i++) dayCodes[i] = text.charCodeAt(i);
    textDay = day;
  }
  let rest = ms - day * 86_400_000;
  const hour = Math.floor(rest / 3_600_000);
  rest -= hour * 3_600_000;
  const minute = Math.floor(rest / 60_000);
  rest -= minute * 60_000;
  const second = Math.floor(rest / 1000);
  const milli = rest - second * 1000;
  const c = dayCodes;
  return String.fromCharCode(
    c[0]!,
    c[1]!,
    c[2]!,
    c[3]!,
    c[4]!,
    c[5]!,
    c[6]!,
    c[7]!,
    c[8]!,
    c[9]!,
    0x54,
    d0 + Math.floor(hour / 10),
    d0 + (hour % 10),
    0x3a,
    d0 + Math.floor(minute / 10),
    d0 + (minute % 10),
    0x3a,
    d0 + Math.floor(second / 10),
    d0 + (second % 10),
    0x2e,
    d0 + Math.floor(milli / 100),
    d0 + (Math.floor(milli / 10) % 10),
    d0 + (milli % 10),
    0x5a,
  );
}
