import { useState } from 'preact/hooks';
import { api } from '../api/client.ts';
import type { Rollout, RolloutStatus } from '../api/types.ts';
import { rolloutStatuses } from '../api/types.ts';
import { RolloutBadge, waveText } from '../components/rolloutParts.tsx';
import { StreamIndicator } from '../components/StreamIndicator.tsx';
import { count, time } from '../format.ts';
import { useLoad, useRolloutEvents, useThrottle } from '../hooks.ts';
import { rolloutHref, setQuery } from '../router.ts';
import { Problemish } from './common.tsx';

// Every rollout, newest first, live from the `rollout` events of /v1/events: a
// known rollout's row is replaced in place, a new one reloads the list (at most once a second).

export function RolloutsPage({ url }: { url: URL }) {
  const status = (url.searchParams.get('status') as RolloutStatus | null) ?? null;
  const [tick, setTick] = useState(0);
  const list = useLoad(`rollouts:${status ?? ''}:${tick}`, (signal) => api.rollouts(status, signal));
  const [live, setLive] = useState<ReadonlyMap<string, Rollout>>(new Map());
  const reload = useThrottle(() => setTick((t) => t + 1), 1_000);
  const stream = useRolloutEvents(undefined, (r) => {
    const known = list.data?.rollouts.some((x) => x.rollout === r.rollout) ?? false;
    if (!known) reload();
    setLive((m) => new Map(m).set(r.rollout, r));
  });
  const rows = (list.data?.rollouts ?? []).map((r) => live.get(r.rollout) ?? r).filter((r) => status === null || r.status === status);
  return (
    <>
      <div class="page-head">
        <h1>Rollouts</h1>
        <StreamIndicator status={stream} />
      </div>
      <p class="muted">
        One spec to many nodes in waves; a wave opens only when every node of the one before reported the digest the rollout sent it. Start
        one with <code>converge rollout start</code> or <code>POST /v1/rollouts</code>.
      </p>
      <div class="filters" role="group" aria-label="Filter by status">
        <button
          type="button"
          class={status === null ? 'pressed' : ''}
          aria-pressed={status === null}
          onClick={() => setQuery({ status: null })}
        >
          all
        </button>
        {rolloutStatuses.map((s) => (
          <button
            type="button"
            key={s}
            class={status === s ? 'pressed' : ''}
            aria-pressed={status === s}
            onClick={() => setQuery({ status: s })}
          >
            {s}
          </button>
        ))}
      </div>
      {list.error !== null && <Problemish error={list.error} what="the rollouts" />}
      {list.data !== null && rows.length === 0 && <p data-testid="no-rollouts">No rollout{status === null ? '' : ` ${status}`}.</p>}
      {rows.length > 0 && (
        <div class="table-wrap">
          <table data-testid="rollouts">
            <caption class="sr-only">Rollouts, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Rollout</th>
                <th scope="col">Status</th>
                <th scope="col">Wave</th>
                <th scope="col" class="num">
                  Done
                </th>
                <th scope="col" class="num">
                  Pending
                </th>
                <th scope="col" class="num">
                  Failed
                </th>
                <th scope="col" class="num">
                  Superseded
                </th>
                <th scope="col" class="num">
                  Targets
                </th>
                <th scope="col">Started</th>
                <th scope="col">By</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.rollout} data-rollout={r.rollout}>
                  <th scope="row">
                    <a href={rolloutHref(r.rollout)}>
                      <code>{r.rollout}</code>
                    </a>
                  </th>
                  <td>
                    <RolloutBadge status={r.status} />
                  </td>
                  <td>{waveText(r)}</td>
                  <td class="num" data-col="done">
                    {count(r.totals.done)}
                  </td>
                  <td class="num">{count(r.totals.pending)}</td>
                  <td class="num">{count(r.totals.failed)}</td>
                  <td class="num">{count(r.totals.superseded)}</td>
                  <td class="num">{count(r.targets)}</td>
                  <td>{time(r.startedAt)}</td>
                  <td>{r.startedBy}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}
