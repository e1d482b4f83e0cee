import { after, test } from 'node:test';
import { join } from 'node:path';
import type { ArchiveOptions } from '../../src/store/archive/archiveMove.ts';
import type { EventStore } from '../../src/store/port.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { archivePostgresStore } from '../../src/store/postgres/postgresArchive.ts';
import { archiveSqliteStore } from '../../src/store/sqlite/sqliteArchive.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { describeOnPostgres, scratchSchema } from './postgres.ts';
import type { ScratchSchema } from './postgres.ts';

// A CLI test that reads through an archive runs the same body on both stores that archive: a
// SQLite file and a scratch PostgreSQL schema, each opened and archived by its own adapter.

export type ArchiveStore = Readonly<{
  name: 'sqlite' | 'postgres';
  /** What `CONVERGE_STORE` names. */
  url: string;
  open: () => EventStore;
  archive: (options: ArchiveOptions) => Promise<{ segments: readonly string[] }>;
}>;

/** `<subject> on SQLite <claim>` as a test with a store in `dir`, and `<claim>` under `<subject> on PostgreSQL`. */
export function onArchiveStores(dir: string, subject: string, claim: string, body: (store: ArchiveStore) => Promise<void>): void {
  test(`${subject} on SQLite ${claim}`, async () => {
    const path = join(dir, 'fleet.db');
    await body({
      name: 'sqlite',
      url: `sqlite:${path}`,
      open: () => createSqliteEventStore(path),
      archive: (o) => archiveSqliteStore(path, o),
    });
  });
  describeOnPostgres(`${subject} on PostgreSQL`, () => {
    let scratch: ScratchSchema | null = null;
    after(async () => scratch?.drop());
    test(claim, async () => {
      const s = (scratch = scratchSchema('converge_archive_cli'));
      await body({
        name: 'postgres',
        url: s.url,
        open: () => createPostgresEventStore(s.url),
        archive: (o) => archivePostgresStore(s.url, o),
      });
    });
  });
}
