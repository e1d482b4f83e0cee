import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { clientFor, splitHosts } from '../../src/store/postgres/hosts.ts';
import { parsePostgresUrl } from '../../src/store/postgres/postgresEventStore.ts';

// libpq's multi-host URL (src/store/postgres/hosts.ts): one connection string per host, the rest
// of the URL kept. The failover itself runs in test/faults/postgresFailoverScenario.ts (npm run faults).

test('a URL with one host is kept as it is, and its connections are plain pg clients', () => {
  const url = 'postgres://u:p@db:5432/x?schema=s';
  assert.deepEqual(splitHosts(url), [url]);
  assert.equal(clientFor({ connectionString: url }), pg.Client);
});

test('a multi-host URL becomes one URL per host, user, password, database and parameters kept', () => {
  assert.deepEqual(splitHosts('postgresql://u:p%40w@a:5432,b:5433,c/db?schema=s&sslmode=disable'), [
    'postgresql://u:p%40w@a:5432/db?schema=s&sslmode=disable',
    'postgresql://u:p%40w@b:5433/db?schema=s&sslmode=disable',
    'postgresql://u:p%40w@c/db?schema=s&sslmode=disable',
  ]);
  assert.deepEqual(splitHosts('postgres://a:1,b:2'), ['postgres://a:1', 'postgres://b:2']);
});

test('an empty host in the list is a configuration error', () => {
  assert.throws(() => splitHosts('postgres://a:1,,b:2/db'), { code: 'CONVERGE_ERR_CONFIG_INVALID' });
});

test('a multi-host store connects to the first host that is writable, and says so when none is', async () => {
  // Nothing listens on ports 1 and 2 of loopback: both refuse, so the connect fails naming the cause.
  const Client = clientFor({ connectionString: 'postgres://u@127.0.0.1:1,127.0.0.1:2/db' });
  assert.notEqual(Client, pg.Client);
  const c = new Client({ connectionString: 'postgres://u@127.0.0.1:1,127.0.0.1:2/db' });
  c.on('error', () => undefined);
  await assert.rejects(c.connect(), /no writable PostgreSQL among 2 hosts/);
});

test('the store URL keeps its hosts and gives its schema', () => {
  assert.deepEqual(parsePostgresUrl('postgres://u:pw@a:5432,b:5433/db?schema=s&x=1'), {
    connectionString: 'postgres://u:pw@a:5432,b:5433/db?x=1',
    schema: 's',
  });
  assert.deepEqual(parsePostgresUrl('postgres://u@a:5432/db'), { connectionString: 'postgres://u@a:5432/db', schema: null });
  assert.throws(() => parsePostgresUrl('postgres://u@a:5432,b:x/db'), { code: 'CONVERGE_ERR_CONFIG_INVALID' });
});
