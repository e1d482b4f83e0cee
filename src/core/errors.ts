// One registry of stable error codes. The API maps `http` to a status and
// problem+json; the transport maps `ingest` codes to reject-to-dead-letter with the code in a
// header. A test checks every code here is documented in docs/errors.md.

export const errorCodes = {
  // wire (docs/design.md §1): a body a node sent that we will not turn into an event
  CONVERGE_ERR_WIRE_TOO_LARGE: { http: 413, summary: 'message body exceeds the configured size limit' },
  CONVERGE_ERR_WIRE_NOT_JSON: { http: 400, summary: 'message body is not valid JSON' },
  CONVERGE_ERR_WIRE_TOO_DEEP: { http: 400, summary: 'message body nests deeper than the limit' },
  CONVERGE_ERR_WIRE_TOO_MANY_ENTRIES: { http: 400, summary: 'an array or object in the message body holds more entries than the limit' },
  CONVERGE_ERR_WIRE_SCHEMA: { http: 400, summary: 'message body does not match the node-side wire struct' },
  CONVERGE_ERR_WIRE_NODE_MISSING: { http: 400, summary: 'message body has no node, or an empty one' },
  CONVERGE_ERR_WIRE_DIGEST: { http: 400, summary: 'declared is not 64 lowercase hex characters' },
  CONVERGE_ERR_WIRE_BASE64: { http: 400, summary: 'a []byte field is not standard padded base64' },
  CONVERGE_ERR_USER_ID_MISSING: { http: 400, summary: 'message has no user_id property, so the sender is unknown' },
  CONVERGE_ERR_USER_ID_MISMATCH: { http: 400, summary: 'message user_id differs from the node named in its body' },
  CONVERGE_ERR_ROUTING_KEY: { http: 400, summary: 'message arrived with a routing key the engine does not ingest' },
  CONVERGE_ERR_RATE_LIMITED: {
    http: 429,
    summary: 'a node sent messages faster than its budget; the excess went to mesh.dead, not the store',
  },

  // declarations (docs/design.md §1)
  CONVERGE_ERR_SPEC_INVALID: { http: 400, summary: 'declaration spec is not valid' },
  CONVERGE_ERR_SPEC_DUPLICATE_ID: { http: 400, summary: 'two resources in one declaration share an id' },
  CONVERGE_ERR_PORT_CARRIED: { http: 409, summary: 'a resource asks for a port the node already carries' },
  CONVERGE_ERR_SIGNATURE_INVALID: { http: 400, summary: 'signature does not verify over the declaration bytes' },
  CONVERGE_ERR_DECLARATION_INVALID: { http: 400, summary: 'declaration bytes are not a valid declaration' },
  CONVERGE_ERR_KEY_INVALID: { http: 500, summary: 'signing key cannot be read as an Ed25519 key' },
  CONVERGE_ERR_KEY_FILE: {
    http: 500,
    summary: 'keygen cannot write the key file: it exists (a key is never overwritten) or the folder is not writable',
  },

  // events and store (docs/design.md §2, §5)
  CONVERGE_ERR_EVENT_INVALID: {
    http: 500,
    summary: 'a stored event cannot be read: a type or version this Converge does not know, or data that does not match its schema',
  },
  CONVERGE_ERR_WRONG_EXPECTED_REVISION: { http: 409, summary: 'stream is not at the expected revision' },
  CONVERGE_ERR_EVENT_TOO_LARGE: { http: 413, summary: 'event exceeds the store size limit' },
  CONVERGE_ERR_STORE_UNAVAILABLE: { http: 503, summary: 'event store cannot be reached or written' },
  CONVERGE_ERR_STORE_SCHEMA: { http: 500, summary: 'store file was written by an unsupported schema version' },
  CONVERGE_ERR_STORE_CLOSED: { http: 503, summary: 'event store has been closed' },
  CONVERGE_ERR_STORE_IN_USE: {
    http: 409,
    summary: 'another converge serve holds this SQLite store; a SQLite file takes one engine (PostgreSQL for several)',
  },
  CONVERGE_ERR_DUPLICATE_EVENT_ID: { http: 409, summary: 'an event id is already stored in another stream or position' },
  CONVERGE_ERR_ARCHIVE_NEEDED: {
    http: 503,
    summary: 'the read needs events the store moved to its archive, and no archive was given: give --archive-dir',
  },

  // transport (docs/design.md §1)
  CONVERGE_ERR_TOPOLOGY_CONFLICT: { http: 500, summary: 'broker already has a queue or exchange declared differently' },
  CONVERGE_ERR_VHOST_SHARED: {
    http: 500,
    summary: "the broker vhost already carries another store's reports; two stores on one vhost split them",
  },
  CONVERGE_ERR_BROKER_UNAVAILABLE: { http: 503, summary: 'broker cannot be reached' },
  CONVERGE_ERR_INBOX_OUTDATED: {
    http: 500,
    summary: "a node's inbox exists with the arguments of an earlier Converge; the relay publishes to it as it is until it is migrated",
  },

  // node accounts (docs/operations.md, "Node accounts")
  CONVERGE_ERR_BROKER_ADMIN: { http: 502, summary: 'broker management API refused or failed a request' },
  CONVERGE_ERR_NODE_ID_INVALID: { http: 400, summary: 'node id is not lowercase letters, digits, dot, underscore or hyphen (1-63)' },
  CONVERGE_ERR_NODE_EXISTS: { http: 409, summary: 'a broker account with this name exists and was not replaced' },

  // rollouts (docs/design.md §8)
  CONVERGE_ERR_ROLLOUT_NOT_FOUND: { http: 404, summary: 'no rollout has this id' },
  CONVERGE_ERR_ROLLOUT_STATE: {
    http: 409,
    summary: 'the rollout is not in a state that allows this (resume a running one, pause or abort a finished one)',
  },
  CONVERGE_ERR_ROLLOUT_PLAN: {
    http: 400,
    summary:
      'the rollout cannot be planned: bad id, waves, failure budget, timeout or moment to restore (asOf), no target, or the id is taken',
  },

  // operator interfaces (docs/design.md §7)
  CONVERGE_ERR_STOP_TIMEOUT: {
    http: 500,
    summary: 'serve did not finish stopping within --stop-timeout-ms and exited without it',
  },
  CONVERGE_ERR_CONFIG_INVALID: { http: 500, summary: 'configuration is not valid' },
  CONVERGE_ERR_NODE_NOT_FOUND: { http: 404, summary: 'no event has ever named this node' },
  CONVERGE_ERR_NODE_RETIRED: { http: 409, summary: 'the node is retired already; a send brings it back into the fleet' },
  CONVERGE_ERR_NODE_PINNED: { http: 409, summary: 'the node is pinned: it keeps its spec; unpin it, or send with force' },
  CONVERGE_ERR_HOLD_STATE: { http: 409, summary: 'the node is held (pinned) already, or not held (pinned) to release (unpin)' },
  CONVERGE_ERR_BAD_REQUEST: { http: 400, summary: 'request parameters or body are not valid' },
  CONVERGE_ERR_UNAUTHENTICATED: { http: 401, summary: 'request has no valid bearer token' },
  CONVERGE_ERR_FORBIDDEN: { http: 403, summary: 'token lacks the scope this route needs' },
  CONVERGE_ERR_AWAIT_TIMEOUT: { http: 408, summary: 'node did not catch up with the digest before the timeout' },
  CONVERGE_ERR_CLIENT_OVER_CAP: {
    http: 429,
    summary: 'this token (with reads open: this address) already holds as many event streams or awaits as it may',
  },
  CONVERGE_ERR_CLIENT_OVER_RATE: {
    http: 429,
    summary: 'this token sent more bytes of request bodies to the write routes than it may in a minute',
  },
  CONVERGE_ERR_SERVER_AT_CAP: { http: 503, summary: 'the engine already holds as many event streams or awaits as it serves at once' },
  CONVERGE_ERR_INGEST_FAILING: { http: 503, summary: 'ingest cannot append to the store; deliveries are held unacked and retried' },
  CONVERGE_ERR_RELAY_FAILING: { http: 503, summary: 'the relay cannot publish recorded declarations to the broker; it retries' },
  CONVERGE_ERR_NOT_READY: { http: 503, summary: 'projections have not caught up with the store' },
  CONVERGE_ERR_STOPPING: { http: 503, summary: 'the engine is stopping: ask again, of another engine or of this one once it is back' },
  CONVERGE_ERR_PROJECTION_FAILED: { http: 503, summary: 'the fold failed on an event; projections stopped before it' },
  CONVERGE_ERR_ROUTE_NOT_FOUND: { http: 404, summary: 'no such route; see /v1/openapi.json' },
  CONVERGE_ERR_BODY_TOO_LARGE: { http: 413, summary: 'request body exceeds the size limit' },
  CONVERGE_ERR_URI_TOO_LONG: { http: 414, summary: 'a path segment of the request URL is longer than the limit' },
  CONVERGE_ERR_UNSUPPORTED_MEDIA_TYPE: { http: 415, summary: 'request body is not application/json' },
  CONVERGE_ERR_SNAPSHOT_INVALID: {
    http: 500,
    summary: 'read-model snapshot file cannot be read, is of another format, or fails its checksum, schema or cross-check',
  },
  CONVERGE_ERR_REPLAY_MISMATCH: { http: 500, summary: 'a replay from zero disagrees with the live read model or snapshot' },
  // evidence bundles (docs/audit.md#evidence-bundles-how-an-auditor-checks-one-with-nothing-but-converge)
  CONVERGE_ERR_EVIDENCE_UNSIGNED: {
    http: 409,
    summary:
      "no signed checkpoint covers the node's events up to the moment asked (ask for an unsigned bundle, or wait for the next checkpoint)",
  },
  CONVERGE_ERR_EVIDENCE_LOG_CHANGED: {
    http: 500,
    summary: 'the stored events do not give a root the log signed or its head: run converge audit verify',
  },
  CONVERGE_ERR_API_UNAVAILABLE: {
    http: 502,
    summary: 'the converge API (--server) cannot be reached, or answered something that is not the API',
  },
  CONVERGE_ERR_USAGE: { http: 400, summary: 'command line is not valid (unknown flag, missing argument)' },
  CONVERGE_ERR_INTERNAL: { http: 500, summary: 'unexpected internal error' },
} as const satisfies Record<string, { http: number; summary: string }>;

export type ErrorCode = keyof typeof errorCodes;

export class ConvergeError extends Error {
  override readonly name = 'ConvergeError';
  readonly code: ErrorCode;
  readonly details: Readonly<Record<string, unknown>> | undefined;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; details?: Record<string, unknown> }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options?.details;
  }
}

export const isConvergeError = (e: unknown, code?: ErrorCode): e is ConvergeError =>
  e instanceof ConvergeError && (code === undefined || e.code === code);

/** Wrap anything thrown into a ConvergeError, keeping the original as `cause`. */
export const toConvergeError = (e: unknown, fallback: ErrorCode = 'CONVERGE_ERR_INTERNAL'): ConvergeError =>
  e instanceof ConvergeError ? e : new ConvergeError(fallback, e instanceof Error ? e.message : String(e), { cause: e });
