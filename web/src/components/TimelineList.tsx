import type { TimelineEntry } from '../api/types.ts';
import { classMeaning, clock, duration, shortDigest, time } from '../format.ts';
import { ClassBadge, Digest, StatusBadge } from './badges.tsx';

// A node's events newest first (GET /v1/nodes/:node/timeline): declarations with what became of
// them, reports with their class, each race marked and explained in one sentence, silences.

export function raceSentence(e: TimelineEntry): string | null {
  if (e.race === null) return null;
  const named =
    e.digest === null
      ? 'no digest'
      : e.serial === null
        ? `a digest never sent to this node (${shortDigest(e.digest)})`
        : `declaration #${e.serial}`;
  return `This report names ${named} but arrived at ${clock(e.at)}, after #${e.race.sentSerial} was sent at ${clock(e.race.sentAt)}: comparing clocks would have counted the node as caught up with #${e.race.sentSerial}; comparing digests keeps it ${e.status}.`;
}

function Describe({ e }: { e: TimelineEntry }) {
  if (e.type === 'DeclarationSent') {
    const d = e.declaration;
    return (
      <>
        <strong>Sent declaration #{e.serial}</strong> <Digest value={e.digest} />
        {d !== null && (
          <span class="muted">
            {' '}
            ({d.resourceIds.join(', ') || 'no resources'}) —{' '}
            {d.outcome === 'acknowledged'
              ? `acknowledged after ${duration(d.latencyMs)}`
              : d.outcome === 'superseded'
                ? `superseded unread at ${clock(d.supersededAt)}`
                : 'not acknowledged yet'}
          </span>
        )}
      </>
    );
  }
  if (e.type === 'ReportReceived') {
    const r = e.report;
    const failed = Object.keys(r?.failed ?? {});
    return (
      <>
        <strong>Report</strong> naming {e.digest === null ? 'no digest' : <Digest value={e.digest} />}
        {e.serial !== null && ` (#${e.serial})`} {e.class !== null && <ClassBadge cls={e.class} />}
        {e.duplicate && <span class="muted"> duplicate delivery, changes nothing</span>}
        <span class="muted">
          {e.class !== null && ` ${classMeaning[e.class]}.`}
          {r !== null && r.refused !== '' && ` Refused: ${r.refused}.`}
          {failed.length > 0 && ` Failed: ${failed.join(', ')}.`}
        </span>
      </>
    );
  }
  return <strong>Alive</strong>;
}

export function TimelineList({
  entries,
  onAsOf,
  asOf,
}: {
  entries: readonly TimelineEntry[];
  onAsOf: (position: string) => void;
  asOf: string | null;
}) {
  return (
    <ol class="timeline" data-testid="timeline">
      {entries.map((e) => {
        const race = raceSentence(e);
        const beyond = asOf !== null && /^\d+$/.test(asOf) && BigInt(e.position) > BigInt(asOf);
        return (
          <li
            key={e.position}
            class={`tl tl-${e.type}${race !== null ? ' tl-race' : ''}${beyond ? ' tl-beyond' : ''}`}
            data-position={e.position}
            data-type={e.type}
          >
            <div class="tl-when">
              <time dateTime={e.at}>{time(e.at)}</time>
              <span class="muted"> · position {e.position}</span>
            </div>
            <div class="tl-what">
              <Describe e={e} /> <span class="muted">→</span> <StatusBadge status={e.status} />
              {e.silentForMs !== null && <p class="gap">Back after {duration(e.silentForMs)} of silence (longer than the grace period).</p>}
              {race !== null && (
                <p class="race" data-testid="race">
                  <span class="badge race-badge">
                    <span aria-hidden="true">⚑</span> race
                  </span>{' '}
                  {race}
                </p>
              )}
            </div>
            <div class="tl-act">
              <button
                type="button"
                class="link"
                onClick={() => onAsOf(e.position)}
                aria-label={`Show the node as of position ${e.position}`}
              >
                as of here
              </button>
            </div>
          </li>
        );
      })}
    </ol>
  );
}
