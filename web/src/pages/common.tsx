import { ApiError } from '../api/client.ts';

/** An API error as a person reads it (a 401 points at the one token form, in the header). */
export function Problemish({ error, what }: { error: Error; what: string }) {
  if (error instanceof ApiError && error.needsToken) return <p class="muted">Reading {what} needs a bearer token (asked for above).</p>;
  if (error instanceof ApiError && error.status === 403)
    return (
      <p class="error">
        This token may not read {what}: {error.message}
      </p>
    );
  return (
    <p class="error" role="alert">
      Could not load {what}: {error.message}
      {error instanceof ApiError && error.problem !== null ? ` (${error.problem.code})` : ''}
    </p>
  );
}
