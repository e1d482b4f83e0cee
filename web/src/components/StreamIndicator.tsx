import type { StreamStatus } from '../api/stream.ts';
import { duration } from '../format.ts';
import { useNow } from '../hooks.ts';

// Says whether the page is live: connected to /v1/events, disconnected (since when, why), or
// resumed after a drop (and how long it was down). A polite live region, so a screen reader
// hears the change without losing its place.

export function StreamIndicator({ status }: { status: StreamStatus }) {
  useNow(1_000);
  // The clock read now, not at the last tick: a state entered since then would read as negative.
  const now = Math.max(Date.now(), status.since);
  const recently = now - status.since < 60_000;
  let text: string;
  if (status.state === 'live')
    text = status.resumedAfterMs !== null && recently ? `Live — resumed after ${duration(status.resumedAfterMs)} disconnected` : 'Live';
  else if (status.state === 'connecting') text = 'Connecting to the event stream…';
  else text = `Disconnected for ${duration(now - status.since)}${status.reason === null ? '' : ` (${status.reason})`} — retrying`;
  return (
    <p class={`stream stream-${status.state}`} role="status" aria-live="polite" data-stream={status.state}>
      <span aria-hidden="true">{status.state === 'live' ? '●' : status.state === 'connecting' ? '◌' : '○'}</span> {text}
    </p>
  );
}
