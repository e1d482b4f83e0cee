import { ConvergeError } from '../../core/errors.ts';

// What a failed SQLite call becomes, on the event loop (sqliteEventStore.ts) and on the writer
// thread (sqliteWriterThread.ts) alike: a file that is not a database is a schema error, anything
// else the store being unavailable; a ConvergeError passes through.
export const sqliteError = (err: unknown, what: string): ConvergeError => {
  if (err instanceof ConvergeError) return err;
  const code = (err as { code?: unknown }).code;
  if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT') {
    return new ConvergeError('CONVERGE_ERR_STORE_SCHEMA', `${what}: the file is not a readable SQLite database (${String(code)})`, {
      cause: err,
    });
  }
  return new ConvergeError('CONVERGE_ERR_STORE_UNAVAILABLE', `${what}: ${err instanceof Error ? err.message : String(err)}`, {
    cause: err,
  });
};
