import { useState } from 'preact/hooks';
import { ApiError, api } from '../api/client.ts';
import type { NodeOutcome, Rollout } from '../api/types.ts';
import { outcomes } from '../api/types.ts';
import { OutcomeBadge, RolloutBadge, waveParts, waveText } from '../components/rolloutParts.tsx';
import { StackedBar } from '../components/StackedBar.tsx';
import { StreamIndicator } from '../components/StreamIndicator.tsx';
import { count, duration, shortDigest, time, timeoutHeldText } from '../format.ts';
import { Digest } from '../components/badges.tsx';
import { useLoad, useNow, useRolloutEvents, useThrottle } from '../hooks.ts';
import { nodeHref, setQuery } from '../router.ts';
import { Problemish } from './common.tsx';

// One rollout: its plan and where it stands, each wave's nodes by outcome, and the
// nodes themselves (a wave and an outcome picked in the URL), live from /v1/events?rollout=.
// Pause, resume and abort need a token with the send scope.

const pageSize = 100;

function Header({ r, now }: { r: Rollout; now: number }) {
  const end =
    r.halted !== null
      ? r.halted.why === 'noneDone'
        ? `halted in wave ${r.halted.wave} at ${time(r.halted.at)}: its nodes settled with none done (${r.halted.failures} failure(s), budget ${r.halted.maxFailures})`
        : r.halted.criterion !== undefined
          ? `halted in wave ${r.halted.wave} at ${time(r.halted.at)}: criterion ${r.halted.criterion.asGiven} tripped, ${r.halted.criterion.failures} failure(s) over the ${r.halted.criterion.allowed} it allowed of ${r.halted.criterion.settled} settled`
          : `halted in wave ${r.halted.wave} at ${time(r.halted.at)}: ${r.halted.failures} failure(s) over the budget of ${r.halted.maxFailures}`
      : r.aborted !== null
        ? `aborted at ${time(r.aborted.at)} by ${r.aborted.by}${r.aborted.reason === '' ? '' : `: ${r.aborted.reason}`}`
        : r.completed !== null
          ? `completed at ${time(r.completed.at)}`
          : r.pausedAt !== null
            ? `paused since ${time(r.pausedAt)}`
            : null;
  // The open wave (or the rollback) past its timeout, held by the engine while no report can arrive.
  const heldWave = r.waves.find((w) => w.timeoutHeld != null);
  const held =
    heldWave !== undefined
      ? `Wave ${heldWave.wave}: ${timeoutHeldText(heldWave.timeoutHeld)}`
      : r.rollback?.timeoutHeld != null
        ? `Rollback: ${timeoutHeldText(r.rollback.timeoutHeld)}`
        : null;
  return (
    <section class="card" aria-labelledby="rollout-h">
      <h2 id="rollout-h">
        <RolloutBadge status={r.status} /> {waveText(r)}
      </h2>
      {end !== null && (
        <p data-testid="rollout-end" class={r.halted !== null ? 'error' : ''}>
          {end}
        </p>
      )}
      {held !== null && <p data-testid="timeout-held">{held}</p>}
      <dl class="kv">
        <div>
          <dt>Spec</dt>
          <dd>
            <a href={`/?spec=${r.specDigest}`}>
              <code title={r.specDigest}>{shortDigest(r.specDigest)}</code>
            </a>{' '}
            to {count(r.targets)} node(s)
          </dd>
        </div>
        <div>
          <dt>Waves</dt>
          <dd>
            {r.asGiven.waves} = {r.waves.map((w) => w.to).join(', ')}
          </dd>
        </div>
        <div>
          <dt>{r.asGiven.abortOn === undefined ? 'Failure budget' : 'Abort criteria'}</dt>
          <dd data-testid="budget">
            {r.asGiven.abortOn === undefined
              ? `${r.budget.used} of ${r.budget.max} used (${r.asGiven.maxFailures})`
              : r.criteria
                  .map(
                    (c) =>
                      `${c.asGiven}: ${c.failures} failure(s), ${c.allowed === null ? `waits for ${c.minSettled} settled` : `allows ${c.allowed} of ${c.settled} settled`}`,
                  )
                  .join('; ')}
          </dd>
        </div>
        <div>
          <dt>Wave timeout</dt>
          <dd>
            {duration(r.waveTimeoutMs)}
            {r.pauseMs > 0 ? `, then a pause of ${duration(r.pauseMs)}` : ''}
          </dd>
        </div>
        <div>
          <dt>Convergence</dt>
          <dd data-testid="latency">
            {r.convergence.samples === 0
              ? '—'
              : `p50 ${duration(r.convergence.p50Ms)} · p99 ${duration(r.convergence.p99Ms)} over ${count(r.convergence.samples)} node(s)`}
          </dd>
        </div>
        <div>
          <dt>ETA</dt>
          <dd data-testid="eta">
            {r.eta.ms === null
              ? r.status === 'running'
                ? 'not known yet'
                : '—'
              : `about ${duration(Math.max(0, Date.parse(r.eta.at ?? '') - now))} (${count(r.eta.remaining)} node(s) to go)`}
          </dd>
        </div>
        <div>
          <dt>Started</dt>
          <dd>
            {time(r.startedAt)} by {r.startedBy}
          </dd>
        </div>
      </dl>
      {r.halted !== null && r.halted.failed.length > 0 && (
        <ul>
          {r.halted.failed.map((f) => (
            <li key={f.node}>
              <a href={nodeHref(f.node)}>{f.node}</a> {f.reason}: {f.detail}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function Commands({ r, onDone }: { r: Rollout; onDone: (r: Rollout) => void }) {
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  // Pause, resume and abort steer a running or paused rollout; a rollback (once per rollout) may
  // follow any status but rolling back or rolled back (docs/design.md §8, "Rollback").
  const steering = r.status === 'running' || r.status === 'paused';
  const rollbackable = r.status !== 'rollingBack' && r.status !== 'rolledBack';
  if (!steering && !rollbackable) return null;
  const act = (action: 'pause' | 'resume' | 'abort' | 'rollback') => {
    // Rolling back sends every node this rollout reached its previous spec: asked once more.
    if (
      action === 'rollback' &&
      !window.confirm(
        `Roll back rollout ${r.rollout}? Every node it sent its spec to is sent its previous spec again. This cannot be undone.`,
      )
    )
      return;
    setBusy(true);
    setError(null);
    api.rolloutCommand(r.rollout, action, reason).then(
      (next) => {
        setBusy(false);
        setReason('');
        onDone(next);
      },
      (e: unknown) => {
        setBusy(false);
        setError(e instanceof ApiError && e.problem !== null ? `${e.message} (${e.problem.code})` : String(e));
      },
    );
  };
  return (
    <section class="card" aria-labelledby="commands-h">
      <h2 id="commands-h">Steer it</h2>
      <label>
        Reason (recorded) <input value={reason} onInput={(e) => setReason((e.currentTarget as HTMLInputElement).value)} />
      </label>{' '}
      {!steering ? null : r.status === 'paused' ? (
        <button type="button" disabled={busy} onClick={() => act('resume')}>
          Resume
        </button>
      ) : (
        <button type="button" disabled={busy} onClick={() => act('pause')}>
          Pause
        </button>
      )}{' '}
      {steering && (
        <button type="button" disabled={busy} onClick={() => act('abort')}>
          Abort
        </button>
      )}{' '}
      <button type="button" disabled={busy} data-testid="rollback" onClick={() => act('rollback')}>
        Roll back
      </button>
      {error !== null && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}

export function RolloutPage({ id, url }: { id: string; url: URL }) {
  const waveParam = url.searchParams.get('wave');
  const outcome = (url.searchParams.get('outcome') as NodeOutcome | null) ?? null;
  const now = useNow(1_000);
  const [tick, setTick] = useState(0);
  const loaded = useLoad(`rollout:${id}`, (signal) => api.rollout(id, signal));
  const [live, setLive] = useState<Rollout | null>(null);
  const r = live ?? loaded.data;
  const wave = waveParam === null ? (r === null ? null : Math.max(1, r.current)) : Number(waveParam);
  const [after, setAfter] = useState<number | null>(null);
  const nodes = useLoad(r === null ? null : `rnodes:${id}:${wave}:${outcome}:${after}:${tick}`, (signal) =>
    api.rolloutNodes(id, { wave, outcome, after, limit: pageSize }, signal),
  );
  const refresh = useThrottle(() => setTick((t) => t + 1), 1_000);
  const stream = useRolloutEvents(id, (next) => {
    setLive(next);
    refresh();
  });
  const notFound = loaded.error instanceof ApiError && loaded.error.status === 404;
  const pick = (params: Record<string, string | null>) => {
    setAfter(null);
    setQuery(params);
  };
  return (
    <>
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href="/rollouts">Rollouts</a> <span aria-hidden="true">›</span> <span aria-current="page">{id}</span>
      </nav>
      <div class="page-head">
        <h1>
          Rollout <code>{id}</code>
        </h1>
        <StreamIndicator status={stream} />
      </div>
      {notFound ? (
        <p class="error" role="alert">
          No rollout named <code>{id}</code>.
        </p>
      ) : loaded.error !== null && r === null ? (
        <Problemish error={loaded.error} what="this rollout" />
      ) : r === null ? (
        <p class="muted">Loading…</p>
      ) : (
        <>
          <Header r={r} now={now} />
          <Commands r={r} onDone={setLive} />
          <section class="card" aria-labelledby="waves-h">
            <h2 id="waves-h">Waves</h2>
            <ol class="waves" data-testid="waves">
              {r.waves.map((w) => (
                <li key={w.wave} data-wave={w.wave} aria-current={w.wave === wave ? 'true' : undefined}>
                  <StackedBar
                    title={`Wave ${w.wave}: ${count(w.size)} node(s), ${
                      w.completedAt !== null
                        ? `completed ${time(w.completedAt)}${w.recorded === null ? '' : ` (then ${w.recorded.done} done, ${w.recorded.failed} failed)`}`
                        : w.startedAt === null
                          ? 'waiting'
                          : r.status !== 'running' && r.status !== 'paused'
                            ? `${r.status}, open`
                            : w.deadline === null
                              ? 'sending'
                              : Date.parse(w.deadline) <= now
                                ? `open, past its timeout${w.timeoutHeld == null ? '' : ', held'}`
                                : `open, times out in ${duration(Date.parse(w.deadline) - now)}`
                    }`}
                    parts={waveParts(w, (o) => `/rollouts/${encodeURIComponent(id)}?wave=${w.wave}&outcome=${o}`)}
                    total={w.size}
                  />
                  <button type="button" class="link" onClick={() => pick({ wave: String(w.wave), outcome: null })}>
                    Show its nodes
                  </button>
                </li>
              ))}
            </ol>
          </section>
          <section class="card" aria-labelledby="rnodes-h">
            <h2 id="rnodes-h">
              Nodes of wave {wave}
              {outcome === null ? '' : `, ${outcome}`}
            </h2>
            <div class="filters" role="group" aria-label="Filter by outcome">
              <button
                type="button"
                class={outcome === null ? 'pressed' : ''}
                aria-pressed={outcome === null}
                onClick={() => pick({ outcome: null })}
              >
                all
              </button>
              {outcomes.map((o) => (
                <button
                  type="button"
                  key={o}
                  class={outcome === o ? 'pressed' : ''}
                  aria-pressed={outcome === o}
                  onClick={() => pick({ outcome: o })}
                >
                  {o}
                </button>
              ))}
            </div>
            {nodes.error !== null && <Problemish error={nodes.error} what="the rollout's nodes" />}
            {nodes.data !== null && (
              <>
                <p class="muted">
                  {count(nodes.data.total)} node(s){after === null ? '' : ' (a later page)'}
                </p>
                <div class="table-wrap">
                  <table data-testid="rollout-nodes">
                    <caption class="sr-only">The wave's nodes in wave order</caption>
                    <thead>
                      <tr>
                        <th scope="col">Node</th>
                        <th scope="col">Outcome</th>
                        <th scope="col">Sent</th>
                        <th scope="col">Why not done</th>
                      </tr>
                    </thead>
                    <tbody>
                      {nodes.data.nodes.map((n) => (
                        <tr key={n.node} data-node={n.node}>
                          <th scope="row">
                            <a href={nodeHref(n.node)}>{n.node}</a>
                          </th>
                          <td>
                            <OutcomeBadge outcome={n.outcome} />
                          </td>
                          <td>
                            {n.digest === null ? (
                              '—'
                            ) : (
                              <>
                                #{n.serial ?? '?'} <Digest value={n.digest} /> {time(n.sentAt)}
                              </>
                            )}
                          </td>
                          <td>{n.detail ?? ''}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </div>
                <div class="pager">
                  {after !== null && (
                    <button type="button" onClick={() => setAfter(null)}>
                      First page
                    </button>
                  )}
                  {nodes.data.next !== null && (
                    <button type="button" onClick={() => setAfter(nodes.data!.next)}>
                      Next page
                    </button>
                  )}
                </div>
              </>
            )}
          </section>
        </>
      )}
    </>
  );
}
