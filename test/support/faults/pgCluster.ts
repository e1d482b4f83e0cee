import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, appendFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

// PostgreSQL clusters a fault scenario owns: made with initdb on a free loopback port in a temp
// directory, started and stopped with pg_ctl, a streaming standby made with pg_basebackup, all
// removed afterwards. The shared server on 5432 is never touched (other tests use it). As root
// (CI) every command runs as the `postgres` user, which owns the directories; otherwise as the
// current user. Server binaries missing is an error that says what is missing, never a skip.

const run = promisify(execFile);

/** The server's bin directory: CONVERGE_PG_BIN, else the newest /usr/lib/postgresql/<v>/bin with what is needed. */
export function postgresBin(): string {
  const needed = ['initdb', 'pg_ctl', 'pg_basebackup'];
  const has = (dir: string): boolean => needed.every((b) => existsSync(join(dir, b)));
  const set = process.env['CONVERGE_PG_BIN'];
  if (set !== undefined) {
    if (!has(set)) throw new Error(`CONVERGE_PG_BIN=${set} lacks one of ${needed.join(', ')}`);
    return set;
  }
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => has(join(root, v, 'bin')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0)
    throw new Error(
      `PostgreSQL server binaries (${needed.join(', ')}) not found under ${root}/<version>/bin: install the server package (postgresql-15) or set CONVERGE_PG_BIN`,
    );
  return join(root, versions[0]!, 'bin');
}

const asRoot = process.getuid?.() === 0;
const owner = (): { uid: number; gid: number } => {
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  return { uid, gid };
};

/** Run a server binary as the clusters' owner. */
async function pgRun(bin: string, args: readonly string[]): Promise<string> {
  const file = join(postgresBin(), bin);
  const [cmd, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', file, ...args]] : [file, [...args]];
  try {
    const { stdout, stderr } = await run(cmd, argv, { cwd: tmpdir(), timeout: 120_000 });
    return `${stdout}${stderr}`;
  } catch (e) {
    const err = e as Error & { stdout?: string; stderr?: string };
    throw new Error(`${bin} ${args.join(' ')} failed: ${err.message}\n${err.stdout ?? ''}${err.stderr ?? ''}`, { cause: e });
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export type PgCluster = Readonly<{
  name: string;
  port: number;
  dir: string;
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  url: string;
  start: () => Promise<void>;
  /** `pg_ctl stop -m immediate`: every backend killed at once, no shutdown checkpoint (a crash, for the data). */
  crash: () => Promise<void>;
  promote: () => Promise<void>;
  query: <R extends pg.QueryResultRow>(sql: string) => Promise<R[]>;
}>;

export type PgLab = Readonly<{
  /** A primary; `synchronousStandby` names the standby its commits wait for (synchronous_standby_names). */
  primary: (options?: { synchronousStandby?: string }) => Promise<PgCluster>;
  /** A streaming standby of `of`, its walreceiver's application_name `name`. */
  standby: (of: PgCluster, name: string) => Promise<PgCluster>;
  /** Stop every cluster made and remove its directory. */
  remove: () => Promise<void>;
}>;

export function createPgLab(tag: string): PgLab {
  postgresBin(); // says what is missing now, before anything is made
  const base = mkdtempSync(join(tmpdir(), `converge-pg-${tag}-`));
  if (asRoot) {
    const o = owner();
    chownSync(base, o.uid, o.gid);
  }
  const made: PgCluster[] = [];
  const stopAllNow = (): void => {
    for (const c of made) {
      try {
        const file = join(postgresBin(), 'pg_ctl');
        const args = ['stop', '-D', c.dir, '-m', 'immediate', '-w'];
        if (asRoot) execFileSync('runuser', ['-u', 'postgres', '--', file, ...args], { stdio: 'ignore', cwd: tmpdir() });
        else execFileSync(file, args, { stdio: 'ignore' });
      } catch {
        // not running
      }
    }
  };
  // A test process that exits, or is ended by a signal (the test runner's timeout), still stops its servers.
  const onSignal = (signal: NodeJS.Signals): void => {
    stopAllNow();
    rmSync(base, { recursive: true, force: true });
    process.kill(process.pid, signal);
  };
  process.once('exit', stopAllNow);
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);

  const cluster = (name: string, port: number): PgCluster => {
    const dir = join(base, name);
    const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    const c: PgCluster = {
      name,
      port,
      dir,
      url,
      start: async () => {
        await pgRun('pg_ctl', ['start', '-D', dir, '-w', '-t', '120', '-l', join(base, `${name}.log`)]);
      },
      crash: async () => {
        await pgRun('pg_ctl', ['stop', '-D', dir, '-m', 'immediate', '-w', '-t', '120']);
      },
      promote: async () => {
        await pgRun('pg_ctl', ['promote', '-D', dir, '-w', '-t', '120']);
      },
      query: async <R extends pg.QueryResultRow>(sql: string) => {
        const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
        client.on('error', () => undefined);
        await client.connect();
        try {
          return (await client.query<R>(sql)).rows;
        } finally {
          await client.end().catch(() => undefined);
        }
      },
    };
    made.push(c);
    return c;
  };
  /** Settings of ours, last in the file so they win over anything copied from the primary. */
  const configure = (dir: string, port: number, extra: string[]): void =>
    appendFileSync(
      join(dir, 'postgresql.conf'),
      [
        '',
        '# converge fault scenario',
        `port = ${port}`,
        "listen_addresses = '127.0.0.1'",
        `unix_socket_directories = '${base}'`,
        'max_connections = 60',
        'shared_buffers = 16MB',
        ...extra,
        '',
      ].join('\n'),
    );

  return {
    primary: async (options = {}) => {
      const port = await freePort();
      const c = cluster(`primary-${port}`, port);
      await pgRun('initdb', ['-D', c.dir, '--auth=trust', '--username=postgres', '--encoding=UTF8', '--no-sync']);
      configure(c.dir, port, [
        'wal_level = replica',
        'max_wal_senders = 4',
        'wal_keep_size = 64MB',
        ...(options.synchronousStandby === undefined
          ? []
          : [`synchronous_standby_names = '${options.synchronousStandby}'`, 'synchronous_commit = on']),
      ]);
      await c.start();
      return c;
    },
    standby: async (of, name) => {
      const port = await freePort();
      const c = cluster(`standby-${port}`, port);
      await pgRun('pg_basebackup', [
        '-h',
        '127.0.0.1',
        '-p',
        String(of.port),
        '-U',
        'postgres',
        '-D',
        c.dir,
        '-R',
        '-X',
        'stream',
        '-c',
        'fast',
      ]);
      // pg_basebackup copied the primary's synchronous_standby_names: promoted with it and no standby of
      // its own, every commit would wait for ever (docs/operations.md, "PostgreSQL restart and failover").
      configure(c.dir, port, [`cluster_name = '${name}'`, 'hot_standby = on', "synchronous_standby_names = ''"]);
      await c.start();
      return c;
    },
    remove: async () => {
      process.removeListener('exit', stopAllNow);
      process.removeListener('SIGTERM', onSignal);
      process.removeListener('SIGINT', onSignal);
      stopAllNow();
      rmSync(base, { recursive: true, force: true });
    },
  };
}
