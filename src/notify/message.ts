import { createHmac, timingSafeEqual } from 'node:crypto';
import { uuidV5 } from '../core/events/index.ts';
import type { Notification, Severity, TriggerName } from './triggers.ts';

// What goes on the wire to a destination. A message carries one notification, or — when a trigger
// fires faster than the destination's coalescing allows — one summary of many (count, the first
// nodes, the positions they span). Webhooks get a CloudEvent 1.0 in structured mode, signed with
// HMAC-SHA256 over `<timestamp>.<body>`; Slack-compatible hooks get `{text, blocks}`.

export type Message = Readonly<{
  /** The CloudEvent id: the notification's own id, or for a summary one derived from its trigger and the first and last notification it counts. */
  id: string;
  trigger: TriggerName;
  severity: Severity;
  time: string;
  /** The notifications it stands for, in position order (a summary keeps only the first `firstNodes` of them). */
  items: readonly Notification[];
  /** How many notifications it stands for (items.length unless a summary). */
  count: number;
  /** Positions of the first and last event it covers (decimal strings outside). */
  fromPosition: bigint;
  toPosition: bigint;
}>;

export const single = (n: Notification): Message => ({
  id: n.id,
  trigger: n.trigger,
  severity: n.severity,
  time: n.time,
  items: [n],
  count: 1,
  fromPosition: n.position,
  toPosition: n.position,
});

/** One message for many notifications of one trigger (at least one), keeping the first `keep`. */
export function summary(
  all: readonly Notification[],
  keep: number,
  count: number = all.length,
  last: Notification = all[all.length - 1]!,
): Message {
  const first = all[0]!;
  return {
    id: count === 1 ? first.id : uuidV5(`NotificationSummary/${first.id}/${last.id}/${count}`),
    trigger: first.trigger,
    severity: first.severity,
    time: last.time,
    items: all.slice(0, keep),
    count,
    fromPosition: first.position,
    toPosition: last.position,
  };
}

export const cloudEventType = (t: TriggerName): string => `io.converge.${t}`;
export const cloudEventSource = '/converge';

const itemJson = (n: Notification): Record<string, unknown> => ({
  id: n.id,
  trigger: n.trigger,
  severity: n.severity,
  time: n.time,
  node: n.node,
  rollout: n.rollout,
  specDigest: n.specDigest,
  eventId: n.eventId,
  position: n.position.toString(),
  summary: n.summary,
  facts: n.facts,
});

/** The CloudEvents 1.0 structured-mode body (application/cloudevents+json). */
export function cloudEvent(m: Message): string {
  const only = m.count === 1 ? m.items[0] : undefined;
  return JSON.stringify({
    specversion: '1.0',
    id: m.id,
    source: cloudEventSource,
    type: cloudEventType(m.trigger),
    time: m.time,
    ...(only?.node ? { subject: only.node } : {}),
    datacontenttype: 'application/json',
    data: {
      severity: m.severity,
      count: m.count,
      coalesced: m.count > 1,
      fromPosition: m.fromPosition.toString(),
      toPosition: m.toPosition.toString(),
      summary: only !== undefined ? only.summary : `${m.count} × ${m.trigger}`,
      notifications: m.items.map(itemJson),
    },
  });
}

/** A Slack-compatible incoming-webhook body. */
export function slackBody(m: Message): string {
  const head = m.count === 1 ? m.items[0]!.summary : `${m.count} × ${m.trigger} (first ${m.items.length} below)`;
  const text = `[${m.severity}] ${head}`;
  const lines = m.count === 1 ? [] : m.items.map((n) => `• ${n.summary}`);
  return JSON.stringify({
    text,
    blocks: [
      { type: 'section', text: { type: 'mrkdwn', text: `*${m.severity.toUpperCase()}* ${escapeSlack(head)}` } },
      ...(lines.length === 0 ? [] : [{ type: 'section', text: { type: 'mrkdwn', text: escapeSlack(lines.join('\n')).slice(0, 2900) } }]),
      { type: 'context', elements: [{ type: 'mrkdwn', text: `converge ${m.trigger} · id ${m.id}` }] },
    ],
  });
}

const escapeSlack = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export const signatureHeader = 'converge-signature';
export const timestampHeader = 'converge-timestamp';

/** `v1=<hex HMAC-SHA256 of "<timestamp>.<body>">`, the timestamp in Unix seconds. */
export const sign = (secret: string, timestamp: number, body: string): string =>
  `v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;

/**
 * What a receiver does (docs/operations.md "Notifications"): recompute the HMAC over the timestamp
 * header, a dot and the raw body; compare in constant time; refuse a timestamp further than
 * `toleranceS` from its own clock (a replayed old message), and drop an id already seen.
 */
export function verifySignature(
  secret: string,
  headers: Readonly<{ signature: string | undefined; timestamp: string | undefined }>,
  body: string,
  nowS: number,
  toleranceS = 300,
): boolean {
  const ts = Number(headers.timestamp);
  if (!Number.isInteger(ts) || Math.abs(nowS - ts) > toleranceS || headers.signature === undefined) return false;
  const want = Buffer.from(sign(secret, ts, body));
  const got = Buffer.from(headers.signature);
  return want.length === got.length && timingSafeEqual(want, got);
}
