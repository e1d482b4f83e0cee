import { MaxAppendSizeExceededError } from '@eventstore/db-client';
import { ConvergeError } from '../../core/errors.ts';

// What a failed EventStoreDB call becomes: the port's errors, with gRPC's text made readable.

/**
 * gRPC's text, made one plain sentence: `14 UNAVAILABLE: No connection established.
 * Last error: Error: connect ECONNREFUSED 127.0.0.1:1. Resolution note: ` becomes `EventStoreDB
 * unavailable: no connection established (connect ECONNREFUSED 127.0.0.1:1)`. The status prefix
 * repeats the error's type, and grpc-js appends a resolution note even when it has none.
 */
export function grpcText(message: string): string {
  const status = /^\d+ ([A-Z_]+): /.exec(message);
  let text = message
    .slice(status?.[0].length ?? 0)
    .replace(/\.?\s*Resolution note:\s*$/, '')
    .replace(/\bError: /g, '')
    .trim();
  const lastError = /^No connection established\.? Last error: (.*?)\.?$/.exec(text);
  if (lastError !== null) text = `no connection established (${lastError[1]})`;
  return status === null ? text : `EventStoreDB ${status[1]!.toLowerCase().replace(/_/g, ' ')}: ${text}`;
}

export const esdbError = (err: unknown, what: string): ConvergeError => {
  if (err instanceof ConvergeError) return err;
  if (err instanceof MaxAppendSizeExceededError) {
    return new ConvergeError('CONVERGE_ERR_EVENT_TOO_LARGE', `${what}: EventStoreDB refused the append as too large (${err.message})`, {
      cause: err,
    });
  }
  return new ConvergeError('CONVERGE_ERR_STORE_UNAVAILABLE', `${what}: ${grpcText(err instanceof Error ? err.message : String(err))}`, {
    cause: err,
  });
};
