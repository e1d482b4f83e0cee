import assert from 'node:assert/strict';
import { test } from 'node:test';
import { grpcText } from '../../src/store/esdb/esdbEventStore.ts';

// What an operator reads when EventStoreDB is away: one sentence, no gRPC status
// prefix, no "Error: " inside, no empty "Resolution note:" at the end.

test('a refused connection reads as EventStoreDB unavailable, with the socket error in brackets', () => {
  assert.equal(
    grpcText('14 UNAVAILABLE: No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:1. Resolution note: '),
    'EventStoreDB unavailable: no connection established (connect ECONNREFUSED 127.0.0.1:1)',
  );
});

test('a resolution note with something in it is kept', () => {
  assert.equal(
    grpcText('14 UNAVAILABLE: No addresses resolved. Resolution note: DNS lookup of esdb.invalid failed'),
    'EventStoreDB unavailable: No addresses resolved. Resolution note: DNS lookup of esdb.invalid failed',
  );
});

test('a deadline names its status in words', () => {
  assert.equal(grpcText('4 DEADLINE_EXCEEDED: Deadline exceeded'), 'EventStoreDB deadline exceeded: Deadline exceeded');
});

test('a message that is not gRPC text is left as it is', () => {
  assert.equal(grpcText('stream not found'), 'stream not found');
});
