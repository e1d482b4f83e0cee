// The version of the fold's output. A read-model snapshot records it and is restored only by a
// fold of the same version (src/readModel/snapshot/snapshotFile.ts): a snapshot folded by other rules would
// otherwise be served as if this fold had made it (docs/design.md §3: restored model = replay).
//
// Bump it whenever a change to projections/ changes what foldNode returns for some history.
// test/projections/foldVersion.test.ts folds a fixed corpus and fails with "bump foldVersion"
// when the result differs from the one recorded for this version; comments, renames and speed-ups
// that change no result need no bump, so snapshots survive them.
//
// 2: SentSummary carries the spec digest (docs/design.md §2).
// 3: a bounded send history (earlierSends, the last 8 sends) replaces the Map of every digest
//    sent; a report naming an older digest is unknown (docs/design.md "Bounded send history").
// 4: a node state carries retiredAt (NodeRetired; a later send clears it), and the fleet's counts
//    leave retired nodes out (docs/design.md §3 "Retired nodes").
export const foldVersion = 4;
