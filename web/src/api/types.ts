import type { z } from 'zod';
import type * as s from '../../../src/api/schemas.ts';

// The dashboard is typed against the same zod schemas the API parses with and documents in
// /v1/openapi.json (src/api/schemas.ts). Type imports only: neither zod nor any server code is
// in the bundle (eslint.config.js refuses value imports from outside web/).

export type NodeView = z.infer<typeof s.nodeView>;
export type NodeList = z.infer<typeof s.nodeList>;
export type NodesQuery = z.input<typeof s.nodesQuery>;
export type Fleet = z.infer<typeof s.fleet>;
export type Timeline = z.infer<typeof s.timeline>;
export type TimelineEntry = z.infer<typeof s.timelineEntry>;
export type StateAt = z.infer<typeof s.stateAtResponse>;
export type Problem = z.infer<typeof s.problem>;
export type DeclarationAccepted = z.infer<typeof s.declarationAccepted>;
export type Health = z.infer<typeof s.health>;
export type NodeStatus = z.infer<typeof s.statusEnum>;
export type Rollout = z.infer<typeof s.rolloutSummary>;
export type RolloutList = z.infer<typeof s.rolloutList>;
export type RolloutNodes = z.infer<typeof s.rolloutNodes>;
export type RolloutNode = z.infer<typeof s.rolloutNode>;
export type WaveCounts = z.infer<typeof s.waveCounts>;
export type TimeoutHeld = z.infer<typeof s.timeoutHeld>;
export type RolloutStatus = z.infer<typeof s.rolloutStatusEnum>;
export type NodeOutcome = z.infer<typeof s.nodeOutcomeEnum>;
export type LivenessState = z.infer<typeof s.livenessEnum>;
export type ReportClass = z.infer<typeof s.reportClassEnum>;

// The node statuses are defined once, in projections/node/nodeState.ts (nodeStatuses): NodeStatus is
// derived from that list through the API's schema. Here is only the dashboard's display order,
// a record so that the compiler refuses it if it misses a status or names one that is not.
const statusOrder: Readonly<Record<NodeStatus, true>> = { converged: true, behind: true, degraded: true, refused: true, undeclared: true };
export const statuses: readonly NodeStatus[] = Object.keys(statusOrder) as NodeStatus[];
export const livenesses: readonly LivenessState[] = ['connected', 'disconnected', 'never-seen', 'not-observed'];

export const rolloutStatuses: readonly RolloutStatus[] = [
  'running',
  'paused',
  'halted',
  'completed',
  'aborted',
  'rollingBack',
  'rolledBack',
];
export const outcomes: readonly NodeOutcome[] = ['done', 'pending', 'refused', 'degraded', 'unsendable', 'superseded', 'skipped', 'unsent'];
