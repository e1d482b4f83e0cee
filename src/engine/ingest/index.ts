// Ingest: reports and alive from the broker into the store (createIngest.ts tells the way through).
export { createIngest } from './createIngest.ts';
export type { Ingest, IngestOptions, IngestStats } from './options.ts';
