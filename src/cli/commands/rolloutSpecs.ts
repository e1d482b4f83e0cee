import type { CommandSpec } from '../command.ts';

// The metadata of `converge rollout` and `converge rollouts`, in the command table (index.ts).
// Imported by `--help`, so nothing here may import more than types.

export const rolloutCommands: readonly CommandSpec[] = [
  {
    name: 'rollout',
    subcommands: ['start', 'status', 'pause', 'resume', 'abort', 'rollback', 'explain'],
    output: true,
    usage: [
      'converge rollout start (<spec.json|-> | --as-of <time|position>) (--nodes a,b | --all | --spec <digest> | --prefix <p>) --waves 1,10%,50%,100%',
      '         (--max-failures <n|p%> | --abort-on <class+class:n|p%@min,…>) --wave-timeout <10m> [--pause <30s>] [--on-superseded fail|hold] [--rollback-on-halt none|wave|all] [--rate <n/min> | --ramp <base,factor,cap,every>] [--gate-url <url> [--gate-timeout <10s>]] [--id <id>] [--json]',
      '       converge rollout status <id> [--watch] [--json]',
      '       converge rollout pause|abort <id> [--reason <text>] [--json]',
      '       converge rollout rollback <id> [--scope all|wave] [--reason <text>] [--json]',
      '       converge rollout resume <id> [--json]',
      '       converge rollout explain <id> [--archive-dir <dir>] [--json]',
    ].join('\n'),
    summary:
      'roll one spec out to many nodes in waves gated by digests; watch it; pause, resume, abort, roll back; explain it from its events',
    flags: {
      nodes: { type: 'string', value: '<a,b,…>', help: 'start: these nodes, in this order (the first are the canaries)' },
      all: { type: 'boolean', help: 'start: every node the store knows' },
      spec: { type: 'string', value: '<digest>', help: 'start: the nodes whose latest send has this spec digest' },
      prefix: { type: 'string', value: '<p>', help: 'start: the nodes whose id starts with this' },
      waves: { type: 'string', value: '<plan>', help: 'start: cumulative counts or percentages, like 1,10%,50%,100% (default 100%)' },
      'max-failures': { type: 'string', value: '<n|p%>', help: 'start: failures of any class beyond this halt the rollout (default 0)' },
      'abort-on': {
        type: 'string',
        value: '<criteria>',
        help: 'start: abort criteria by class (refused, degraded, timeout, silent, unsendable, superseded, any), like refused+degraded:2,silent:10%@5',
      },
      'wave-timeout': {
        type: 'string',
        value: '<duration>',
        help: 'start: how long a wave may stay behind after its last send (30s, 10m, 1h)',
      },
      pause: { type: 'string', value: '<duration>', help: 'start: wait between a wave completing and the next opening' },
      'on-superseded': {
        type: 'string',
        value: '<fail|hold>',
        help: 'start: a node sent another declaration from elsewhere counts against the budget (fail, default) or holds its wave',
      },
      'rollback-on-halt': {
        type: 'string',
        value: '<none|wave|all>',
        help: "start: on a halt, send the halted wave's nodes (wave) or every node sent (all) their previous spec (default none)",
      },
      rate: { type: 'string', value: '<n>', help: 'start: send to at most n nodes a minute over the whole rollout' },
      ramp: {
        type: 'string',
        value: '<base,factor,cap,every>',
        help: 'start: send base nodes a minute, times factor every <every> (a duration), up to cap a minute',
      },
      'gate-url': {
        type: 'string',
        value: '<url>',
        help: 'start: before each wave after the first, POST the rollout id, wave and counts here; only a 2xx opens the wave',
      },
      'gate-timeout': {
        type: 'string',
        value: '<duration>',
        help: 'start: how long the gate may take to answer (default 10s; more holds the wave)',
      },
      scope: { type: 'string', value: '<all|wave>', help: "rollback: every node this rollout sent to (all, default) or the open wave's" },
      id: { type: 'string', value: '<id>', help: 'start: name the rollout (default: the time and 6 random hex digits)' },
      'as-of': {
        type: 'string',
        value: '<time|position>',
        help: 'start, instead of a spec: send each node the exact spec it had been sent at this ISO time or store position (all digits); a node sent nothing by then is skipped',
      },
      watch: { type: 'boolean', help: 'status: follow the store and print again as it changes, until the rollout ends' },
      reason: { type: 'string', value: '<text>', help: 'pause, abort, rollback: why, for the record' },
    },
    args: [1, 2],
    settings: ['store', 'snapshotPath', 'archiveDir'],
    load: () => import('./rollout.ts'),
  },
  {
    name: 'rollouts',
    output: true,
    usage: 'converge rollouts [--status <s>] [--json]',
    summary: 'every rollout, newest first: status, wave, done / pending / failed',
    flags: {
      status: {
        type: 'string',
        value: '<s>',
        help: 'only rollouts in this status: running, paused, halted, completed, aborted, rollingBack, rolledBack',
      },
    },
    args: [0, 0],
    settings: ['store', 'snapshotPath'],
    load: () => import('./rollouts.ts'),
  },
];
