import { useState } from 'preact/hooks';
import { ApiError, api } from '../api/client.ts';

// The evidence bundle of the moment shown (docs/audit.md#evidence-bundles-how-an-auditor-checks-one-with-nothing-but-converge):
// fetched with the session's token (it never goes in a URL) and saved as a file, which
// `converge audit check` verifies offline. When no signed checkpoint covers the moment yet, it
// says so and offers the unsigned bundle instead.

export function EvidenceButton({ node, at }: { node: string; at: string }) {
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<{ text: string; unsignedOffered: boolean } | null>(null);
  const save = (unsigned: boolean): void => {
    setBusy(true);
    setProblem(null);
    api
      .evidence(node, at, unsigned)
      .then(({ blob, name }) => {
        const url = URL.createObjectURL(blob);
        const a = document.createElement('a');
        a.href = url;
        a.download = name;
        a.click();
        setTimeout(() => URL.revokeObjectURL(url), 0);
      })
      .catch((e: unknown) => {
        const uncovered = e instanceof ApiError && e.problem?.code === 'CONVERGE_ERR_EVIDENCE_UNSIGNED';
        setProblem({
          text: uncovered ? 'No signed checkpoint covers this moment yet.' : e instanceof Error ? e.message : String(e),
          unsignedOffered: uncovered,
        });
      })
      .finally(() => setBusy(false));
  };
  return (
    <p class="evidence">
      <button type="button" disabled={busy} onClick={() => save(false)}>
        Download evidence bundle
      </button>{' '}
      <span class="muted">
        as of {/^\d+$/.test(at) ? `position ${at}` : at}; check it offline with{' '}
        <code>converge audit check &lt;file&gt; --audit-pub audit.pub</code>
      </span>
      {problem !== null && (
        <span role="alert" class="error">
          {' '}
          {problem.text}{' '}
          {problem.unsignedOffered && (
            <button type="button" disabled={busy} onClick={() => save(true)}>
              Download unsigned
            </button>
          )}
        </span>
      )}
    </p>
  );
}
