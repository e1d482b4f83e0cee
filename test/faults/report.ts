// `npm run faults -- --report`: run every fault scenario against the real broker and ingest and
// write RELIABILITY.md. `--only <substring>` runs a subset; with `--report` too, it rewrites only those
// scenarios' rows and keeps the others' as they were. Without `--report` it only prints.
// Exit status is non-zero if any scenario lost, duplicated or appended hostile input.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { probeBroker } from '../support/broker.ts';
import { hostileNodeFlood } from './floodScenario.ts';
import { hostileHttp } from './hostileHttpScenario.ts';
import { connectionExhaustion } from './connectionExhaustionScenario.ts';
import { stuckIngestHealth } from './stuckIngestScenario.ts';
import { clusterFailover } from './clusterFailoverScenario.ts';
import { forgedSnapshot } from './forgedSnapshotScenario.ts';
import { modelBased } from './modelScenario.ts';
import { rollbackSigkill } from './rollbackSigkillScenario.ts';
import { rolloutSigkill } from './rolloutSigkillScenario.ts';
import { allScenarios, runScenario } from './scenarios.ts';
import type { ScenarioResult } from './scenarios.ts';
import { tampering } from './tamperingScenario.ts';
import { tamperedStore } from './tamperedStoreScenario.ts';
import { rewrittenLog } from './rewrittenLogScenario.ts';
import { forgedEvidence } from './forgedEvidenceScenario.ts';
import { twoEngines } from './twoEnginesScenario.ts';
import { frozenLeader } from './frozenLeaderScenario.ts';
import { postgresFault } from './postgresFailoverScenario.ts';
import { partitionScenarios } from './partitionScenario.ts';

const { values } = parseArgs({ options: { report: { type: 'boolean' }, only: { type: 'string' } } });
const probe = await probeBroker();
if (!probe.ok) {
  process.stderr.write(`faults: RabbitMQ unreachable (${probe.reason}); nothing run\n`);
  process.exit(1);
}

const every = [
  ...allScenarios,
  hostileNodeFlood,
  stuckIngestHealth,
  forgedSnapshot,
  hostileHttp,
  connectionExhaustion,
  modelBased,
  tampering,
  tamperedStore,
  rewrittenLog,
  forgedEvidence,
  clusterFailover('stop'),
  clusterFailover('kill'),
  twoEngines,
  frozenLeader,
  postgresFault('restart', 1),
  postgresFault('restart', 2),
  postgresFault('promote', 2),
  ...partitionScenarios,
  rolloutSigkill,
  rollbackSigkill,
];
const chosen = every.filter((s) => values.only === undefined || s.name.includes(values.only));
const results: ScenarioResult[] = [];
for (const s of chosen) {
  process.stderr.write(`faults: ${s.name} …\n`);
  try {
    const r = await runScenario(s);
    results.push(r);
    process.stderr.write(
      `faults: ${s.name}: sent ${r.sent}, confirmed ${r.confirmed}, stored ${r.stored}, lost ${r.lost}, duplicated ${r.duplicated}, hostile ${r.hostileAppended}/${r.hostileTried}, recovered in ${r.recoverMs ?? '—'} ms; ${r.notes.join('; ')}; checks ${JSON.stringify(r.checks)}\n`,
    );
  } catch (e) {
    process.stderr.write(`faults: ${s.name} failed to run: ${(e as Error).message}\n`);
    results.push({
      scenario: s.name,
      faults: s.faults,
      sent: 0,
      confirmed: 0,
      stored: 0,
      lost: 0,
      duplicated: 0,
      hostileTried: 0,
      hostileAppended: 0,
      recoverMs: null,
      notes: [`did not run to the end: ${(e as Error).message}`],
      checks: {},
    });
  }
}

const bad = (r: ScenarioResult): boolean =>
  r.lost > 0 ||
  r.duplicated > 0 ||
  r.hostileAppended > 0 ||
  r.confirmed < r.sent ||
  Object.values(r.checks).includes(false) ||
  r.notes.some((n) => n.startsWith('did not run'));
const cell = (s: string): string => s.replace(/\|/g, '\\|');
const fresh = new Map(
  results.map((r) => [
    r.scenario,
    `| ${cell(r.scenario)} | ${cell(r.faults)} | ${r.sent} | ${r.confirmed} | ${r.stored} | ${r.lost} | ${r.duplicated} | ${r.hostileTried} | ${r.hostileAppended} | ${r.recoverMs === null ? '—' : `${(r.recoverMs / 1000).toFixed(2)} s`} | ${cell([...r.notes, ...Object.entries(r.checks).map(([k, v]) => `${k}: ${v ? 'held' : 'FAILED'}`)].join('; '))} |`,
  ]),
);
/** The rows of the RELIABILITY.md on disk, by scenario name (its first cell). */
function rowsOnDisk(): Map<string, string> {
  const file = new URL('../../RELIABILITY.md', import.meta.url);
  if (!existsSync(file)) return new Map();
  const out = new Map<string, string>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const name = /^\| ((?:[^|\\]|\\.)+?) \| /.exec(line)?.[1];
    if (name !== undefined && name !== 'scenario') out.set(name.replace(/\\\|/g, '|'), line);
  }
  return out;
}
// A partial run (--only) keeps the other scenarios' rows from the last run, in the scenarios' order.
const kept = values.only === undefined ? new Map<string, string>() : rowsOnDisk();
const rows = every.map((s) => fresh.get(s.name) ?? kept.get(s.name)).filter((r): r is string => r !== undefined);
const table = [
  '| scenario | faults injected | sent | confirmed | stored | lost | duplicated | hostile tried | hostile appended | time to recover | notes |',
  '|---|---|---|---|---|---|---|---|---|---|---|',
  ...rows,
].join('\n');

const doc = `# Reliability

Generated by \`npm run faults -- --report\` (test/faults/report.ts) on ${new Date().toISOString().slice(0, 10)}, against
RabbitMQ at the configured URL and the real ingest (\`src/engine/ingest/\` over \`src/transport/\`) writing to SQLite; the
model-based and tampering rows drive the whole engine (send, relay, ingest, projections), and the two-engine row two
\`converge serve\` processes over PostgreSQL. The same scenarios run as
assertions in \`test/faults/*.fault.test.ts\`. Seeded scenarios print their seed (in the notes below); \`CONVERGE_FAULT_SEED\`
replays one, \`CONVERGE_FAULT_KILLS\`, \`CONVERGE_FAULT_MODEL_RUNS\` and \`CONVERGE_FAULT_TAMPER_RUNS\` make a run longer.

Each scenario runs in a fresh vhost with real node accounts (\`src/brokerAdmin/\`, so RabbitMQ validates \`user_id\`).
Nodes publish reports with stable message ids and retry each until the broker confirms it, as the Go node does.
**sent** = distinct reports the nodes published; **confirmed** = of those, confirmed by the broker; **stored** =
confirmed reports found in the store; **lost** = confirmed but not stored (must be 0); **duplicated** = extra copies
of a report in the store (must be 0); **hostile appended** = events produced by hostile input (must be 0).
**Time to recover** is measured here, never asserted by tests: after an instant fault (reset, close, SIGKILL), from
the last fault until every report confirmed before it is stored *and* a report confirmed after it is stored (so the
engine is provably working again); after a lifted fault (blackhole, store down, disk full), from the lift until the
backlog confirmed before it is stored; for baseline and hostile input, the drain time after the load ends.

${table}

## How each fault is made

- **proxy reset / blackhole** — \`test/support/faults/faultProxy.ts\`, a TCP proxy between the engine and the broker. Reset
  destroys every connection with RST. Blackhole forwards nothing and closes nothing, like a partition; the engine
  notices only through AMQP heartbeats (1 s in that scenario) and the broker likewise, which requeues the unacked
  deliveries for the engine's next connection.
- **broker closes all connections** — the management API closes every connection in the scenario's vhost (what
  \`rabbitmqctl close_all_connections -p <vhost>\` does), engine and nodes alike, mid-load. Each close first waits
  2 s (\`CONVERGE_FAULT_CLOSE_DELAY_MS\`), as long as \`rabbitmqctl\` takes to start on a busy machine; the load runs until
  recovery is measured, so a report confirmed after the last close always exists.
- **store unavailable** — \`withStoreFaults\` (\`test/support/faults/withStoreFaults.ts\`) fails appends with
  \`CONVERGE_ERR_STORE_UNAVAILABLE\`; ingest holds deliveries unacked and retries. Then appends that are written but
  reported failed (a reply lost after commit) check that retries are no-ops by event id.
- **disk full** — SQLite on a real tmpfs of 192 KiB (\`test/support/faults/tinyTmpfs.ts\`, needs root) until \`SQLITE_FULL\`,
  then the tmpfs is remounted larger; nothing acknowledged to the broker may be missing.
- **engine SIGKILL** — \`test/support/faults/ingestChild.ts\` (ingest, AMQP → SQLite, and the projection runner writing a
  read-model snapshot every 250 events, as \`serve\` does) is killed with SIGKILL at seeded random moments (0–400 ms
  after each restart said it was consuming, so kills land mid-batch and mid-snapshot) while three nodes publish, and
  restarted each time: 20 kills by default. At the end, a projection runner restores the snapshot the last killed
  engine left, follows the store to its head, and must equal a replay from zero (\`src/readModel/replay.ts\`) field for
  field.
- **hostile input** — bodies from \`test/support/faults/hostileBodies.ts\` that are hostile by construction (random bytes,
  truncated JSON, huge arrays, deep nesting, wrong types, non-hex digests, oversize, NUL bytes, invalid UTF-8), plus
  well-formed reports with no \`user_id\` and reports naming another node, published by an enrolled node among valid
  load. Each must be dead-lettered to \`mesh.dead\` with a code and none may become an event.
- **hostile node flood** — \`test/faults/floodScenario.ts\`: one enrolled node publishes as fast as the
  broker confirms — 10,000 routine reports, 60 of 10,000 failed resources (the widest the wire accepts) and 60 of
  22,000 keys (past it) — while two nodes report at a steady pace, against the ingest with a per-node budget of 20
  units/s, burst 200 (a unit per started 4 KiB). Every steady report must be stored exactly once; every confirmed flood
  message either stored once or found once in \`mesh.dead\` (shed by the budget: \`x-death\` reason \`rejected\`; or
  refused with \`CONVERGE_ERR_WIRE_TOO_MANY_ENTRIES\`); the flooder's stored share within its budget. Here **sent**,
  **confirmed** and **stored** count the steady nodes, **hostile tried** the flood, **hostile appended** too-wide
  bodies stored. The steady nodes' report→stored times before and during the flood are noted, not asserted.
- **stuck ingest seen by health** — \`test/faults/stuckIngestScenario.ts\`: \`serve\`'s composition over
  RabbitMQ with SQLite on a 192 KiB tmpfs, three nodes reporting until \`SQLITE_FULL\`; while full, \`/readyz\` must
  answer 503 \`CONVERGE_ERR_INGEST_FAILING\`, \`/healthz\` 200 with \`ingest.healthy: false\`, and \`/metrics\`
  \`converge_ingest_healthy 0\` with deliveries pending; after the remount to 64 MiB, ready again (time to recover: the
  remount until \`/readyz\` is 200) with every confirmed report stored once.
- **forged snapshot** — \`test/faults/forgedSnapshotScenario.ts\`: \`serve\`'s composition over RabbitMQ and
  SQLite, a declaration to each of three nodes and 20 reports each over the broker; a clean stop writes the read-model
  snapshot. The snapshot is then forged and the engine started on it, once per forgery: a node's report count raised
  and the file resealed by the snapshot module's own writer (right header, matching sha256), the count made a string
  (resealed), one byte changed without resealing, the file cut to 70%. Each must be refused for its reason
  (\`converge_snapshot_rejected_total{reason}\`: cross-check, schema, checksum, truncated), the engine must fold from
  zero and serve the store's truth (replay = live; the node's \`reports\` over HTTP = the store's), and the honest
  snapshot written at the next stop must be restored. Here **hostile tried** counts the forgeries; time to recover is
  the slowest start on a forged snapshot.
- **hostile HTTP clients** — \`test/faults/hostileHttpScenario.ts\`: while two nodes report over
  the broker, the engine's HTTP API (\`src/api/\`, tokens configured) is hit by eight clients that, without a valid token,
  push 4 MiB declaration bodies as fast as their sockets take them, for 3 s, and by one each of: a declaration over the
  store's event limit, a GET with a body, a POST of text/plain, JSON nested 200 levels deep, a 5,000-character path.
  Every upload must be answered 401 (or its connection closed by the server mid-upload) without its body reaching the
  parser, every other request its own problem (413, 413, 415, 400, 414), and no declaration may be sent. Here **hostile
  tried** counts those requests and **hostile appended** declarations they caused. A victim client's median latency
  and the process's RSS are noted, not asserted; the clients run in the engine's process, so both include their cost.
- **connection exhaustion** — \`test/faults/connectionExhaustionScenario.ts\` (one read token opened 20,000
  event streams, the process reached its descriptor limit and every new client, \`/healthz\` included, was reset):
  \`serve\`'s composition over RabbitMQ and SQLite with the caps set low (20 streams per token, 60 in all, 300 sockets,
  a 2 s request timeout) and an admin listener, while two nodes report. First one token opens 400 streams at once
  against the same API without caps (the baseline, in the notes); then against the capped engine, then three more
  tokens 400 each, then 600 sockets connect and send nothing. One token must hold exactly its cap and the engine its
  own; every refusal must be 429 (or 503 past the engine's cap) problem+json with \`Retry-After\` and its connection
  closed; another token must get in while the first is capped; \`/healthz\` must answer on the main listener while the
  streams are capped and on the admin listener (with \`/metrics\`) while the sockets are exhausted; the listener must
  hold no more than its cap of sockets and the silent ones must be closed. Time to recover: from the end of the socket
  flood until the main listener answers \`/healthz\` again. Here **hostile tried** counts streams and sockets opened.
  Descriptor counts are noted, not asserted; the clients run in the engine's process, so they include theirs.
- **model-based** — \`test/faults/modelScenario.ts\`: fast-check draws runs of 10–15 commands (send; a report that is
  matching, stale, unknown or undeclared, and applied, failed or refused; the same delivery again; alive; crash =
  connection closed without draining, subscriptions stopped, no snapshot written, memory dropped; restart = the engine
  built again on the same files; replay from zero) against the whole engine (\`createServer\` over RabbitMQ and SQLite,
  two nodes with real accounts) and a model of a few lines per node. After every command, once its effect landed (report
  stored or delivery acked, projection at the store head; bounded waits), status, caughtUp, the anomaly counters, the
  latest send's digest and serial and the latest report must equal the model; each replay must equal the live read
  model; at the end of each run every report is stored once and every send reached the node's queue.
- **cluster failover** — \`test/faults/clusterFailoverScenario.ts\`: a 3-node RabbitMQ cluster of the scenario's own
  (\`scripts/rabbitmq-cluster.sh\`, beside the system broker), the whole engine given all three URLs, three nodes with
  real accounts publishing reports (one lists the engine's broker node first, two list the others first). Under load,
  the broker node the engine is connected to is stopped for good, by \`rabbitmqctl stop\` or by SIGKILL of its Erlang
  VM. Time to recover runs from the moment the stop began until every report confirmed before the engine lost its
  connection is stored and one confirmed after that is stored too; a declaration sent after the failover must reach its
  node (the relay's publisher resumed). The \`stop\` row also runs in \`npm test\`
  (\`test/faults/clusterFailover.fault.test.ts\`).
- **two engines, one PostgreSQL store** — \`test/faults/twoEnginesScenario.ts\`: two \`converge serve\`
  processes (the built CLI) on one PostgreSQL store (a scratch schema, dropped afterwards) and the scenario's vhost. A
  starts first, so it is \`mesh.reports\`' single active consumer and holds the relay lease; B stands by. Four simulated
  nodes (\`src/simulation/\`) report under load while declarations are POSTed through A's and B's APIs in turn; A is
  SIGKILLed, later restarted, and must then stand by. Time to recover is the larger of the ingest takeover (from the
  SIGKILL until every report confirmed before it and one confirmed after it are stored) and the relay takeover (until B
  logs that it took the relay lease). Every accepted declaration must reach its node, one
  received twice only if it was recorded before the kill (the batch A had in flight), both APIs must answer the same
  \`/v1/nodes\` at the store's head, and \`converge replay --verify\` must agree with each engine's snapshot. Also in
  \`npm test\` (\`test/faults/twoEngines.fault.test.ts\`).
- **frozen relay leader** — \`test/faults/frozenLeaderScenario.ts\`: two \`converge serve\` on one PostgreSQL store;
  A holds the relay lease and is frozen with SIGSTOP (its session stays open) while declarations are POSTed to B every
  250 ms; A is thawed with SIGCONT once one of them was delivered. B must take the relay lease within its bound (the
  lease's ttl, docs/operations.md, "Scaling out"), the latest declaration must reach the node (its inbox keeps only the latest), none POSTed after the freeze began
  may arrive twice, and A must publish nothing once thawed (its \`converge_relay_published_total\`). Time to recover is
  from the SIGSTOP to the first delivery of a declaration POSTed during the freeze. Also in \`npm test\`
  (\`test/faults/frozenLeader.fault.test.ts\`).
- **PostgreSQL restart / failover** — \`test/faults/postgresFailoverScenario.ts\`: PostgreSQL clusters of the
  scenario's own (\`test/support/faults/pgCluster.ts\`: initdb, pg_ctl and pg_basebackup on free loopback ports, as the
  \`postgres\` user when run as root; the shared server is never touched, and the clusters are removed afterwards),
  one or two \`converge serve\` (the built CLI) on them, eight nodes reporting every 40 ms and declarations POSTed to the
  engines' APIs in turn every 150 ms. Restart: the server stopped with \`pg_ctl stop -m immediate\` (every backend
  killed, crash recovery at start) and started again. Failover: a primary with a synchronous streaming standby
  (\`synchronous_standby_names\`, \`synchronous_commit = on\`), the engines given both hosts in one multi-host URL
  (\`src/store/postgres/hosts.ts\`); the primary stopped the same way for good and the standby promoted. Every report
  the broker confirmed must be stored once, every declaration accepted before the stop still be in the store after it,
  every accepted declaration reach its node (twice only if POSTed before the server was down: the relay's
  at-least-once window), the relay lease be taken again
  (a new generation), a declaration accepted after the fault be delivered, and every engine's read model reach the
  store's head. Time to recover: from the stop until every report confirmed before it and one confirmed once the server
  was down are stored, the lease is taken again and a declaration accepted after the fault is delivered, whichever is
  last (each also from the moment the server was back, in the notes). Also in \`npm test\`
  (\`test/faults/postgresFailover.fault.test.ts\`): its failover case failed one run in three at load 30 on
  2026-12-02, not diagnosed; it held in five runs on 2026-12-03 at load 10–14.
- **engine partitioned from PostgreSQL / RabbitMQ / PostgreSQL and RabbitMQ** — \`test/faults/partitionScenario.ts\`:
  two \`converge serve\` (the built CLI) on one PostgreSQL store, each in a network namespace of its own
  (\`test/support/netns.ts\`: \`ip netns\`, veth pairs in 10.213.x.0/30 ranges made and removed by the test, TCP
  forwarders on the root side to PostgreSQL and RabbitMQ on loopback; needs root). A starts first, so it ingests and
  holds the relay lease; B stands by; 8 simulated nodes report and declarations are POSTed through both APIs (to B
  only while A is cut). A's link to PostgreSQL, to RabbitMQ, or both is cut by a \`blackhole\` qdisc on both ends of its
  veth (every packet dropped: a partition, not a reset), held until the takeover the case expects happened (each wait
  bounded), then healed. Store cut: the relay lease must move to B within its bound, and A must issue nothing from then
  until it holds the lease again: its \`converge_relay_issued_total\` (counted as written, since a confirm can arrive
  long after its write) is polled from its /metrics, which answers while its store is cut off, each rise placed
  between the read before it and the read that saw it, and the lease's moves by the engines' own log stamps; the
  partition is held until A's counters were read after B took the lease; B takes it over only after closing A's broker connection (the relay's
  fence, docs/operations.md "Fencing the relay"); B's API must record declarations during the cut. Broker cut: \`mesh.reports\` must move to B (the broker ends A's connection on missed
  heartbeats); the relay lease stays with A, so delivery waits for the heal. Both: both must move. Every confirmed
  report stored once; every accepted declaration received by its node, or replaced in its one-message inbox by a later
  one that was; none twice unless POSTed before the cut (the at-least-once window: the batch in flight); none out of
  order per node (a first receipt with a serial below one its node already had); both APIs at the store head with the
  same nodes. Time to recover: from the cut until a report published after it is stored and a declaration POSTed
  after it is received (by the takeover or after the heal); the takeover times are in the notes. Also in \`npm test\`
  (\`test/faults/partition.fault.test.ts\`, as root).
- **tampered declarations** — \`test/faults/tamperingScenario.ts\`: after an untampered control declaration converges, each
  declaration is recorded, tampered and published to \`node.<id>\` as the relay publishes: a bit flipped at a random
  position (fast-check) in the declaration bytes or in the signature, the same JSON re-encoded, a signature by another
  key. The simulated node (\`src/simulation/\`) verifies the bytes as received and refuses each whole (\`refused\` names the
  reason, \`declared\` = digest of the bytes received); the engine must record the refusal, and the node's state must be
  \`unknown\`/behind when the bytes changed and \`refused\` when only the signature is bad. Here **hostile appended**
  counts tampered declarations the node applied.
- **tampered store** — \`test/faults/tamperedStoreScenario.ts\`: a SQLite store written through the store's appends
  (declarations, reports, alives for 8 nodes, two rounds) is copied, and each copy changed by one SQL statement as an
  insider with the file would: a report's \`declared\` digest, a deleted event, a forged report inserted with the leaf
  hash the store would have written, two events swapped, the tail truncated, then one random byte of one event's data
  or one deleted event (fast-check). The audit verification (\`converge audit verify\`, docs/audit.md) must name the
  first position touched and the kind. Here **hostile appended** counts tamperings not found exactly so.
- **rewritten log and witness** — \`test/faults/rewrittenLogScenario.ts\`: the engine's checkpointer
  (\`src/engine/auditCheckpoints.ts\`, with a witness folder) signs four checkpoints while 8 nodes' history is written
  in four rounds. Each copy is then rewritten as an insider holding the store (and for some cases the audit key)
  would: every event appended again through a fresh store's appends, so rows, leaf hashes and head form a valid tree,
  with a report's digest changed (signed again with another key, and with the stolen audit key), the tail cut after the
  second checkpoint, the checkpoint events removed, or a checkpoint with a forged signature appended.
  \`converge audit verify --audit-pub --witness\` (docs/audit.md#checkpoints-and-witnesses) must exit 1 (a checkpoint
  by another key, a forged one) or 3 (the witness contradicts the log), naming the first witnessed size the rewrite
  touched. Here **hostile appended** counts rewrites not found so. The last case, store, audit key and witness folder
  all rewritten, is the documented limit: it must pass unnoticed.
- **forged evidence** — \`test/faults/forgedEvidenceScenario.ts\`: a SQLite store written in four rounds through the
  store's appends, the engine's checkpointer (\`src/engine/auditCheckpoints.ts\`) signing after each; an evidence
  bundle of one node as of the second round (\`converge audit export\`, docs/audit.md) is then changed as whoever
  holds it could: one event's data, one event left out, one event's proof taken from a bundle of another store, the
  covering checkpoint signed by another key (with the bundle's key replaced by it, and with the key id kept), the
  stated answer. \`converge audit check --audit-pub\` must find each offline, by kind (\`inclusion\`, \`missing\`,
  \`key\`, \`signature\`, \`answer\`) and at the position it touched, and verify the honest bundle. Here **hostile
  appended** counts forgeries not found so.
- **rollout under engine SIGKILL** — \`test/faults/rolloutSigkillScenario.ts\`: the engine as \`serve\` builds it
  (\`test/support/faults/rolloutEngineChild.ts\`: ingest, relay, projections and the rollout driver over SQLite) is
  SIGKILLed at seeded random moments (\`CONVERGE_FAULT_ROLLOUT_KILLS\`, at least 10) while a rollout of 16 simulated nodes
  in 16 waves of one node runs over the scenario's vhost, and restarted each time. Here **sent** counts the rollout's
  targets, **confirmed** the nodes that applied the declaration the rollout recorded for them, **stored** the rollout's
  declarations in the store, **duplicated** those beyond one a node. It must complete with every node done, each node
  must have applied exactly one of its digests, each wave must be started and completed once, and each
  \`WaveCompleted\` must count what the rule gives on the node states replayed from zero. Time to recover runs from the
  last restart to the rollout's completion. Also in \`npm test\` (\`test/faults/rollout.fault.test.ts\`).
- **rollback under engine SIGKILL** — \`test/faults/rollbackSigkillScenario.ts\`: 8 simulated nodes apply a previous
  spec; a rollout of a new one in two waves halts on the last node (a resource fails) and, under \`rollbackOnHalt
  all\`, rolls every node back. The nodes hold their rollback declaration until the kills are done, and the kills
  (\`CONVERGE_FAULT_ROLLBACK_KILLS\`, at least 5) begin once the rollback has begun, so every kill falls while it runs.
  Here **sent** counts the nodes, **confirmed** those whose latest report (replayed from zero) names the digest of their
  rollback declaration, converged, with the previous spec's digest; **stored** the rollback declarations,
  **duplicated** those beyond one a node. Each node must have applied its rollback declaration (a relay redelivery after a kill is recognised by its digest) and no other, and the rollout's history
  must read halted → rollback started → rollback sent → rollback completed, with one rollback. Time to recover runs
  from the last restart to the rollback's end. Also in \`npm test\` (\`test/faults/rollout.fault.test.ts\`).
`;

process.stdout.write(`${table}\n`);
if (values.report) {
  writeFileSync(new URL('../../RELIABILITY.md', import.meta.url), doc);
  process.stderr.write('faults: wrote RELIABILITY.md\n');
}
process.exit(results.some(bad) ? 1 : 0);
