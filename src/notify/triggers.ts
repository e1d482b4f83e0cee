import { uuidV5 } from '../core/events/index.ts';
import type { Recorded, RolloutEvent } from '../core/events/index.ts';
import type { NodeState } from '../../projections/index.ts';

// What is worth telling someone, read from events as they fold (the read model's node changes and
// its rollout events). Pure: the same change gives the same notifications, with the same ids, in
// the live engine and in the replay a restart makes of what it had not yet delivered.

export const severities = ['info', 'warning', 'critical'] as const;
export type Severity = (typeof severities)[number];

/** Each trigger and its severity: the closed list docs/operations.md ("Notifications") documents. */
export const triggerSeverity = {
  'node.degraded': 'warning',
  'node.refused': 'critical',
  'report.stale': 'warning',
  // A digest this engine never sent (or sent too long ago to remember): possibly tampering.
  'report.unknown': 'critical',
  'rollout.wave.started': 'info',
  'rollout.wave.completed': 'info',
  'rollout.halted': 'critical',
  'rollout.completed': 'info',
  'rollout.aborted': 'warning',
  // A rollback answers trouble; one that ends with a node not back on its previous spec needs a person.
  'rollout.rollback.started': 'warning',
  'rollout.rollback.completed': 'info',
  'rollout.rollback.failed': 'critical',
  'projection.failed': 'critical',
  // On time alone and on health, from a timer (watch.ts): a threshold passed, once per episode.
  'node.behind': 'warning',
  'node.disconnected': 'warning',
  'ingest.unhealthy': 'critical',
  'relay.unhealthy': 'critical',
  // Sent only by `converge notify test`, whatever a destination's filter says.
  'notify.test': 'info',
} as const satisfies Record<string, Severity>;
export type TriggerName = keyof typeof triggerSeverity;
export const triggerNames = Object.keys(triggerSeverity) as TriggerName[];

export type Notification = Readonly<{
  /** Stable: the triggering event's id and the trigger's name, so a receiver drops a redelivery. */
  id: string;
  trigger: TriggerName;
  severity: Severity;
  /** Position of the triggering event in the store: the delivery cursor moves by it. */
  position: bigint;
  /**
   * Fired by a timer (watch.ts), not derived from an event: its position is the fold's when it
   * fired, it is not dropped at or below the cursor, and no restart derives it again (its
   * fired-state checkpoint says it was sent).
   */
  timed?: true;
  eventId: string;
  /** When the triggering fact happened (the event's own time). */
  time: string;
  node: string | null;
  rollout: string | null;
  specDigest: string | null;
  /** One line for people. */
  summary: string;
  /** The facts behind it, for programs. */
  facts: Readonly<Record<string, unknown>>;
}>;

export const notificationId = (eventId: string, trigger: TriggerName): string => uuidV5(`Notification/${eventId}/${trigger}`);

function make(
  trigger: TriggerName,
  event: Pick<Recorded, 'id' | 'position'>,
  rest: Omit<Notification, 'id' | 'trigger' | 'severity' | 'position' | 'eventId'>,
): Notification {
  return {
    id: notificationId(event.id, trigger),
    trigger,
    severity: triggerSeverity[trigger],
    position: event.position,
    eventId: event.id,
    ...rest,
  };
}

const eventTime = (e: Recorded): string => {
  const d = e.data as Readonly<Record<string, unknown>>;
  const t = d['receivedAt'] ?? d['sentAt'] ?? d['seenAt'] ?? d['at'] ?? d['startedAt'] ?? d['completedAt'];
  return typeof t === 'string' ? t : new Date(0).toISOString();
};

/** The notifications one node change gives: a status that becomes degraded or refused, a stale or unknown report. */
export function nodeTriggers(previous: NodeState | undefined, state: NodeState, event: Recorded): Notification[] {
  const out: Notification[] = [];
  const base = { node: state.node, rollout: null, specDigest: state.sent?.specDigest ?? null, time: eventTime(event) };
  const was = previous?.status;
  if (state.status === 'refused' && was !== 'refused')
    out.push(
      make('node.refused', event, {
        ...base,
        summary: `node ${state.node} refused its declaration: ${state.reported?.refused ?? ''}`.trim(),
        facts: {
          status: state.status,
          previous: was ?? null,
          refused: state.reported?.refused ?? null,
          serial: state.sent?.serial ?? null,
        },
      }),
    );
  if (state.status === 'degraded' && was !== 'degraded') {
    const failed = state.reported?.failed ?? {};
    out.push(
      make('node.degraded', event, {
        ...base,
        summary: `node ${state.node} is degraded: ${Object.keys(failed).length} resource(s) failed, ${state.missing.length} missing`,
        facts: { status: state.status, previous: was ?? null, failed, missing: state.missing, serial: state.sent?.serial ?? null },
      }),
    );
  }
  const before = previous?.anomalies ?? { stale: 0, unknown: 0 };
  const declared = state.reported?.declared ?? null;
  if (state.anomalies.unknown > before.unknown)
    out.push(
      make('report.unknown', event, {
        ...base,
        summary: `node ${state.node} reported digest ${declared ?? '(none)'}, which this engine did not send it: possible tampering`,
        facts: { declared, sentDigest: state.sent?.digest ?? null, sentSerial: state.sent?.serial ?? null },
      }),
    );
  if (state.anomalies.stale > before.stale)
    out.push(
      make('report.stale', event, {
        ...base,
        summary: `node ${state.node} reported an older declaration than serial ${state.sent?.serial ?? '?'}`,
        facts: { declared, sentDigest: state.sent?.digest ?? null, sentSerial: state.sent?.serial ?? null },
      }),
    );
  return out;
}

/**
 * The notification a rollout event gives, if any: a wave started or completed, the rollout halted,
 * completed or aborted, a rollback started, or ended (completed, or failed when a node failed it).
 */
export function rolloutTrigger(event: Recorded<RolloutEvent>): Notification | null {
  const base = { node: null, specDigest: null, time: eventTime(event) };
  switch (event.type) {
    case 'WaveStarted': {
      const d = event.data;
      return make('rollout.wave.started', event, {
        ...base,
        rollout: d.rollout,
        summary: `rollout ${d.rollout}: wave ${d.wave} opened (${d.to - d.from} node(s))`,
        facts: { wave: d.wave, nodes: d.to - d.from },
      });
    }
    case 'WaveCompleted': {
      const d = event.data;
      return make('rollout.wave.completed', event, {
        ...base,
        rollout: d.rollout,
        summary: `rollout ${d.rollout}: wave ${d.wave} completed, ${d.done} done, ${d.failed} failed, ${d.superseded} superseded`,
        facts: { wave: d.wave, done: d.done, failed: d.failed, superseded: d.superseded, failures: d.failures.slice(0, 20) },
      });
    }
    case 'RolloutHalted': {
      const d = event.data;
      return make('rollout.halted', event, {
        ...base,
        rollout: d.rollout,
        summary: `rollout ${d.rollout} halted in wave ${d.wave}: ${d.why === 'noneDone' ? 'no node of the wave succeeded' : `${d.failures} failure(s) over a budget of ${d.maxFailures}`}`,
        facts: {
          wave: d.wave,
          failures: d.failures,
          maxFailures: d.maxFailures,
          why: d.why ?? 'overBudget',
          failed: d.failed.slice(0, 20),
        },
      });
    }
    case 'RolloutCompleted': {
      const d = event.data;
      return make('rollout.completed', event, {
        ...base,
        rollout: d.rollout,
        summary: `rollout ${d.rollout} completed: ${d.done} done, ${d.failed} failed, ${d.superseded} superseded`,
        facts: { done: d.done, failed: d.failed, superseded: d.superseded },
      });
    }
    case 'RolloutAborted': {
      const d = event.data;
      return make('rollout.aborted', event, {
        ...base,
        rollout: d.rollout,
        summary: `rollout ${d.rollout} aborted by ${d.by}: ${d.reason}`,
        facts: { by: d.by, reason: d.reason },
      });
    }
    case 'RollbackStarted': {
      const d = event.data;
      const what = d.scope === 'wave' ? `wave ${d.wave}` : 'every node sent';
      return make('rollout.rollback.started', event, {
        ...base,
        rollout: d.rollout,
        summary: `rollout ${d.rollout}: rollback of ${what} started by ${d.by}: ${d.reason}`,
        facts: { scope: d.scope, wave: d.wave, by: d.by, reason: d.reason },
      });
    }
    case 'RollbackCompleted': {
      const d = event.data;
      const counts = `${d.done} rolled back, ${d.failed} failed, ${d.skipped} skipped`;
      return make(d.failed > 0 ? 'rollout.rollback.failed' : 'rollout.rollback.completed', event, {
        ...base,
        rollout: d.rollout,
        summary: `rollout ${d.rollout}: rollback ${d.failed > 0 ? 'ended with failures' : 'completed'}: ${counts}`,
        facts: { done: d.done, failed: d.failed, skipped: d.skipped, failures: d.failures.slice(0, 20) },
      });
    }
    default:
      return null;
  }
}
