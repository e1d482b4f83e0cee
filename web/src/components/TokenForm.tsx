import { useState } from 'preact/hooks';
import { getToken, setToken } from '../auth.ts';

// Asked once per browser tab; kept in session storage; sent only as `Authorization: Bearer`.
// The field is a password field so the token is not shown on a shared screen.

export function TokenForm({ reason, onDone }: { reason: string | null; onDone?: () => void }) {
  const [value, setValue] = useState('');
  const has = getToken() !== null;
  return (
    <form
      class="card token-form"
      aria-labelledby="token-h"
      onSubmit={(e) => {
        e.preventDefault();
        setToken(value.trim());
        setValue('');
        onDone?.();
      }}
    >
      <h2 id="token-h">Bearer token</h2>
      {reason !== null && <p class="error">{reason}</p>}
      <p class="muted">
        A token is one of those <code>converge serve</code> was started with (<code>--api-tokens</code> or <code>CONVERGE_API_TOKENS</code>
        ); <code>converge demo</code> prints one when it starts. It is kept in this tab's session storage and sent only in the Authorization
        header.
      </p>
      <div class="tt-row">
        <label for="token-input">Token</label>
        <input
          id="token-input"
          type="password"
          autoComplete="off"
          spellcheck={false}
          value={value}
          required
          onInput={(e) => setValue((e.currentTarget as HTMLInputElement).value)}
        />
        <button type="submit">Use token</button>
        {has && (
          <button
            type="button"
            onClick={() => {
              setToken(null);
              onDone?.();
            }}
          >
            Forget token
          </button>
        )}
      </div>
    </form>
  );
}
