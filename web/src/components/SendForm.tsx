import { useRef, useState } from 'preact/hooks';
import { ApiError, api } from '../api/client.ts';
import type { NodeView } from '../api/types.ts';
import { duration } from '../format.ts';
import { Digest } from './badges.tsx';
import { useNow } from '../hooks.ts';

// Send a declaration (POST /v1/nodes/:node/declarations, a `send`-scoped token), then watch it
// converge (GET …/await). The spec is checked here first so a typo is shown at its line, and the
// API's own validation errors are shown the same way.

// A sample shown as the textarea's placeholder only: pre-filled, one click would send it for real.
const example = JSON.stringify({ resources: [{ id: 'web', image: 'registry.local/web:2' }] }, null, 2);

/** Check the shape the API takes; returns the problems, one per line. */
export function checkSpec(text: string): { spec: unknown; problems: string[] } {
  let spec: unknown;
  try {
    spec = JSON.parse(text);
  } catch (err) {
    const m = err instanceof Error ? err.message : String(err);
    const pos = /position (\d+)/.exec(m);
    if (pos !== null) {
      const before = text.slice(0, Number(pos[1]));
      const line = before.split('\n').length;
      return { spec: null, problems: [`not JSON: ${m.replace(/ in JSON at position \d+.*$/, '')} (line ${line})`] };
    }
    return { spec: null, problems: [`not JSON: ${m}`] };
  }
  const problems: string[] = [];
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec))
    return { spec, problems: ['the spec must be an object: {"resources": [...]}'] };
  const resources = (spec as { resources?: unknown }).resources;
  if (!Array.isArray(resources)) return { spec, problems: ['resources: must be an array of objects, each with an "id"'] };
  const seen = new Set<string>();
  resources.forEach((r: unknown, i) => {
    if (r === null || typeof r !== 'object' || Array.isArray(r)) {
      problems.push(`resources[${i}]: must be an object`);
      return;
    }
    const { id, ports } = r as { id?: unknown; ports?: unknown };
    if (typeof id !== 'string' || id === '') problems.push(`resources[${i}].id: must be a non-empty string`);
    else if (seen.has(id)) problems.push(`resources[${i}].id: "${id}" is used twice`);
    else seen.add(id);
    if (ports !== undefined && (!Array.isArray(ports) || ports.some((p) => !Number.isInteger(p) || p < 1 || p > 65535)))
      problems.push(`resources[${i}].ports: must be whole numbers from 1 to 65535`);
  });
  return { spec, problems };
}

type Phase =
  | { kind: 'idle' }
  | { kind: 'sending' }
  | { kind: 'waiting'; digest: string; serial: number; since: number }
  | { kind: 'converged'; digest: string; serial: number; tookMs: number; state: NodeView }
  | { kind: 'timeout'; digest: string; serial: number; detail: string }
  | { kind: 'error'; problems: string[]; needsToken: boolean };

export function SendForm({ node }: { node: string }) {
  const [text, setText] = useState('');
  const [phase, setPhase] = useState<Phase>({ kind: 'idle' });
  const abort = useRef<AbortController | null>(null);
  const now = useNow(500);
  const empty = text.trim() === '';
  // Nothing typed yet is not a mistake: no problems listed, the button simply waits.
  const local = empty ? { spec: null, problems: [] } : checkSpec(text);
  const problems = phase.kind === 'error' ? phase.problems : [];

  async function submit(e: Event): Promise<void> {
    e.preventDefault();
    if (empty) return;
    if (local.problems.length > 0) {
      setPhase({ kind: 'error', problems: local.problems, needsToken: false });
      return;
    }
    setPhase({ kind: 'sending' });
    let accepted;
    try {
      accepted = await api.send(node, local.spec);
    } catch (err) {
      const issues =
        err instanceof ApiError ? (err.problem?.details?.['issues'] as { path: string; message: string }[] | undefined) : undefined;
      setPhase({
        kind: 'error',
        problems: issues?.map((i) => `${i.path}: ${i.message}`) ?? [err instanceof Error ? err.message : String(err)],
        needsToken: err instanceof ApiError && (err.status === 401 || err.status === 403),
      });
      return;
    }
    const since = Date.now();
    setPhase({ kind: 'waiting', digest: accepted.digest, serial: accepted.serial, since });
    abort.current = new AbortController();
    try {
      const state = await api.await(node, accepted.digest, 120_000, abort.current.signal);
      setPhase({ kind: 'converged', digest: accepted.digest, serial: accepted.serial, tookMs: Date.now() - since, state });
    } catch (err) {
      if (abort.current.signal.aborted) setPhase({ kind: 'idle' });
      else
        setPhase({
          kind: 'timeout',
          digest: accepted.digest,
          serial: accepted.serial,
          detail: err instanceof Error ? err.message : String(err),
        });
    }
  }

  return (
    <section class="card" aria-labelledby="send-h">
      <h2 id="send-h">Send a declaration</h2>
      <form onSubmit={(e) => void submit(e)} noValidate>
        <label for="spec">
          Spec (JSON: <code>{'{"resources": [{"id": …}, …]}'}</code>)
        </label>
        <textarea
          id="spec"
          rows={7}
          spellcheck={false}
          value={text}
          placeholder={example}
          aria-invalid={local.problems.length > 0}
          aria-describedby="spec-problems"
          onInput={(e) => setText((e.currentTarget as HTMLTextAreaElement).value)}
        />
        <ul id="spec-problems" class="problems-list" aria-live="polite">
          {[...new Set([...local.problems, ...problems])].map((p) => (
            <li class="error" key={p}>
              {p}
            </li>
          ))}
        </ul>
        <div class="tt-row">
          <button type="submit" disabled={empty || phase.kind === 'sending' || phase.kind === 'waiting' || local.problems.length > 0}>
            Sign and send to {node}
          </button>
          {phase.kind === 'waiting' && (
            <button type="button" onClick={() => abort.current?.abort()}>
              Stop waiting
            </button>
          )}
        </div>
      </form>
      {phase.kind === 'error' && phase.needsToken && (
        <p class="error">Sending needs a token with the send scope: set one with the Token button at the top.</p>
      )}
      <p role="status" data-testid="send-status">
        {phase.kind === 'sending' && 'Signing, recording and sending…'}
        {phase.kind === 'waiting' && (
          <>
            Sent #{phase.serial} (<Digest value={phase.digest} />
            ). Waiting {duration(now - phase.since)} for the node to report this digest…
          </>
        )}
        {phase.kind === 'converged' && (
          <>
            #{phase.serial} (<Digest value={phase.digest} />
            ): the node reported this digest after {duration(phase.tookMs)}; it is {phase.state.status}.
          </>
        )}
        {phase.kind === 'timeout' && (
          <>
            #{phase.serial} (<Digest value={phase.digest} />
            ): not caught up yet — {phase.detail}
          </>
        )}
      </p>
    </section>
  );
}
