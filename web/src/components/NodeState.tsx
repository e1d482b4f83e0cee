import type { NodeView } from '../api/types.ts';
import { classMeaning, count, duration, statusMeaning, time } from '../format.ts';
import { ClassBadge, Digest, LivenessBadge, StatusBadge } from './badges.tsx';

// One node's state (docs/design.md#3-what-caught-up-means-the-fold-in-projections): status,
// caught up, what was sent beside what it reported, what is missing, failed or refused and why,
// carried ports, liveness, and the conditions' reasons as the API and the CLI give them.

export function NodeStatePanel({ state, title }: { state: NodeView; title: string }) {
  const sent = state.sent;
  const rep = state.reported;
  const failed = Object.entries(rep?.failed ?? {});
  return (
    <section class="card state" aria-labelledby="state-h" data-testid="node-state">
      <h2 id="state-h">{title}</h2>
      <p class="headline">
        <StatusBadge status={state.status} /> <LivenessBadge liveness={state.liveness} />{' '}
        <span class="muted">{statusMeaning[state.status]}</span>
      </p>
      <div class="side-by-side">
        <div>
          <h3>Latest sent</h3>
          {sent === null ? (
            <p>Nothing sent yet.</p>
          ) : (
            <dl class="kv">
              <div>
                <dt>serial</dt>
                <dd>#{sent.serial}</dd>
              </div>
              <div>
                <dt>digest</dt>
                <dd>
                  <Digest value={sent.digest} testId="sent-digest" />
                </dd>
              </div>
              <div>
                <dt>spec</dt>
                <dd>
                  <a href={`/?spec=${sent.specDigest}`}>
                    <Digest value={sent.specDigest} />
                  </a>
                </dd>
              </div>
              <div>
                <dt>sent</dt>
                <dd>{time(sent.sentAt)}</dd>
              </div>
              <div>
                <dt>resources</dt>
                <dd>{sent.resourceIds.join(', ') || '—'}</dd>
              </div>
              <div>
                <dt>acknowledged</dt>
                <dd>{sent.acknowledgedAt === null ? 'not yet' : time(sent.acknowledgedAt)}</dd>
              </div>
            </dl>
          )}
        </div>
        <div class="digest-compare" aria-hidden="true">
          {sent !== null && rep !== null ? (rep.declared === sent.digest ? '=' : '≠') : ''}
        </div>
        <div>
          <h3>Latest reported</h3>
          {rep === null ? (
            <p>No report yet.</p>
          ) : (
            <dl class="kv">
              <div>
                <dt>names</dt>
                <dd>
                  <Digest value={rep.declared} testId="reported-digest" />{' '}
                  {sent !== null && (
                    <span class="sr-only">{rep.declared === sent.digest ? '(the same digest as sent)' : '(not the digest sent)'}</span>
                  )}
                </dd>
              </div>
              <div>
                <dt>class</dt>
                <dd>
                  <ClassBadge cls={rep.class} /> <span class="muted">{classMeaning[rep.class]}</span>
                </dd>
              </div>
              <div>
                <dt>received</dt>
                <dd>{time(rep.receivedAt)}</dd>
              </div>
              <div>
                <dt>applied</dt>
                <dd>{rep.applied.join(', ') || '—'}</dd>
              </div>
            </dl>
          )}
        </div>
      </div>
      {(state.missing.length > 0 || failed.length > 0 || (rep?.refused ?? '') !== '') && (
        <div class="problems">
          <h3>Not applied</h3>
          <ul>
            {rep !== null && rep.refused !== '' && (
              <li>
                <strong>Refused whole:</strong> {rep.refused}
              </li>
            )}
            {failed.map(([id, why]) => (
              <li key={id}>
                <strong>{id}</strong> failed: {why}
              </li>
            ))}
            {state.missing.map((id) => (
              <li key={id}>
                <strong>{id}</strong> missing: neither applied nor failed in the report
              </li>
            ))}
          </ul>
        </div>
      )}
      <h3>Conditions</h3>
      <dl class="kv wide" data-testid="node-conditions">
        {state.conditions.map((c) => (
          <div key={c.type}>
            <dt>{c.type}</dt>
            <dd>
              <strong>{c.status}</strong> <code>{c.reason}</code> <span class="muted">{c.message}</span>
            </dd>
          </div>
        ))}
      </dl>
      <dl class="kv wide">
        <div>
          <dt>carried ports</dt>
          <dd>{state.carried.length === 0 ? 'none' : state.carried.join(', ')}</dd>
        </div>
        <div>
          <dt>last seen</dt>
          <dd>{time(state.liveness.lastSeenAt)}</dd>
        </div>
        <div>
          <dt>last latency</dt>
          <dd>{duration(state.convergence.lastLatencyMs)}</dd>
        </div>
        <div>
          <dt>acknowledged · superseded unread</dt>
          <dd>
            {count(state.convergence.acknowledged)} · {count(state.convergence.superseded)}
          </dd>
        </div>
        <div>
          <dt>reports · stale · unknown · undeclared</dt>
          <dd>
            {count(state.reports)} · {count(state.anomalies.stale)} · {count(state.anomalies.unknown)} · {count(state.anomalies.undeclared)}
          </dd>
        </div>
        <div>
          <dt>position</dt>
          <dd>{state.position}</dd>
        </div>
      </dl>
    </section>
  );
}
