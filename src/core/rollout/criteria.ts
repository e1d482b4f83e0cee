import { failureReasons } from '../events/index.ts';
import type { AbortCriterion, FailureReason, OnSuperseded, RolloutStartedData } from '../events/index.ts';

// Abort criteria by failure class (docs/design.md §8, "Abort criteria"): which classes of failure
// spend a rollout's budget, and how much of it. A criterion names classes and a threshold — a
// count, or a percentage of the nodes settled so far that trips only once `minSettled` of them
// have settled (AWS IoT Jobs' thresholdPercentage and minNumberOfExecutedThings). A class no
// criterion names is listed in the waves' failures but halts nothing.

/** Failures per class and the nodes settled (done, failed or superseded), over the rollout so far. */
export type Tally = Readonly<{
  byClass: Readonly<Partial<Record<FailureReason, number>>>;
  /** Failures recorded before waves counted them by class: only a criterion over every class counts them. */
  unclassified: number;
  settled: number;
}>;

export type Tripped = Readonly<{ criterion: AbortCriterion; failures: number; allowed: number; settled: number }>;

/** The classes a criterion may name: 'superseded' is never a failure under onSuperseded 'hold'. */
export const classesFor = (policy: OnSuperseded): readonly FailureReason[] =>
  policy === 'fail' ? failureReasons : failureReasons.filter((c) => c !== 'superseded');

/**
 * The rollout's criteria: as planned, or for a plan with a single budget (every rollout recorded
 * before criteria existed) one criterion over every class against `maxFailures`, which is the
 * rule those rollouts were planned under.
 */
export function criteriaOf(started: RolloutStartedData): readonly AbortCriterion[] {
  if (started.criteria !== undefined) return started.criteria;
  const policy = started.onSuperseded ?? 'fail';
  return [{ classes: [...classesFor(policy)], count: started.maxFailures, minSettled: 0, asGiven: started.asGiven.maxFailures }];
}

const coversAll = (c: AbortCriterion): boolean => failureReasons.every((x) => x === 'superseded' || c.classes.includes(x));

/** The failures a criterion counts in a tally. */
export function failuresOf(c: AbortCriterion, t: Tally): number {
  let n = coversAll(c) ? t.unclassified : 0;
  for (const k of c.classes) n += t.byClass[k] ?? 0;
  return n;
}

/**
 * The failures a criterion allows over `settled` nodes, or null while a percentage may not trip
 * yet (fewer than `minSettled` settled). A percentage rounds down and so never allows more than
 * it says: 10% of 9 settled nodes allows none, 50% of 3 allows 1, any percentage under 100 of a
 * single node allows none.
 */
export function allowedBy(c: AbortCriterion, settled: number): number | null {
  if (c.count !== undefined) return c.count;
  if (settled < c.minSettled) return null;
  // The small epsilon keeps 3 × 33.3…% of 300 from landing one below what the operator meant.
  return Math.floor(((c.percent ?? 0) * settled) / 100 + 1e-9);
}

/** The first criterion whose failures exceed what it allows, or null. */
export function tripped(criteria: readonly AbortCriterion[], t: Tally): Tripped | null {
  for (const criterion of criteria) {
    const allowed = allowedBy(criterion, t.settled);
    const failures = failuresOf(criterion, t);
    if (allowed !== null && failures > allowed) return { criterion, failures, allowed, settled: t.settled };
  }
  return null;
}

/** `a` and `b` added class by class. */
export function addTally(a: Tally, b: Tally): Tally {
  const byClass: Partial<Record<FailureReason, number>> = { ...a.byClass };
  for (const [k, v] of Object.entries(b.byClass) as [FailureReason, number][]) byClass[k] = (byClass[k] ?? 0) + v;
  return { byClass, unclassified: a.unclassified + b.unclassified, settled: a.settled + b.settled };
}

const aliases: Readonly<Record<string, FailureReason>> = { timedout: 'timeout' };

/**
 * `refused+degraded:5%@10,silent:3`: criteria separated by commas, each the classes it counts
 * (joined by `+`; `any` for every class), a colon, and a count or a percentage of the settled
 * nodes, with `@n` the nodes that must have settled before the percentage may trip (default 1).
 * `timedOut` is accepted for `timeout`. A string answer says what is wrong.
 */
export function parseCriteria(text: string, policy: OnSuperseded): AbortCriterion[] | string {
  const allowed = classesFor(policy);
  const out: AbortCriterion[] = [];
  const parts = text.split(',').map((x) => x.trim());
  if (parts.some((x) => x === '')) return 'abort criteria are class[+class…]:count or class[+class…]:p%[@min], separated by commas';
  for (const part of parts) {
    const m = /^([A-Za-z+]+):(\d+(?:\.\d+)?)(%)?(?:@(\d+))?$/.exec(part);
    if (m === null)
      return `abort criterion ${JSON.stringify(part)} is not class[+class…]:count or class[+class…]:p%[@min] (like refused+degraded:2 or timeout:10%@20)`;
    const classes: FailureReason[] = [];
    for (const word of m[1]!.split('+')) {
      const lower = word.toLowerCase();
      const named = lower === 'any' ? allowed : [aliases[lower] ?? (failureReasons as readonly string[]).find((c) => c === lower)];
      if (named[0] === undefined)
        return `abort criterion ${JSON.stringify(part)}: ${JSON.stringify(word)} is not a failure class (${[...failureReasons, 'any'].join(', ')})`;
      for (const c of named as FailureReason[]) {
        if (!allowed.includes(c)) return `abort criterion ${JSON.stringify(part)}: superseded is no failure under onSuperseded hold`;
        if (!classes.includes(c)) classes.push(c);
      }
    }
    const v = Number(m[2]);
    const percent = m[3] === '%';
    if (!percent && m[4] !== undefined) return `abort criterion ${JSON.stringify(part)}: @min applies to a percentage only`;
    if (percent && v > 100) return `abort criterion ${JSON.stringify(part)} is over 100%`;
    if (!percent && !Number.isInteger(v)) return `abort criterion ${JSON.stringify(part)}: a count is a whole number`;
    out.push({
      classes,
      ...(percent ? { percent: v } : { count: v }),
      minSettled: percent ? Number(m[4] ?? 1) : 0,
      asGiven: part,
    });
  }
  return out;
}
