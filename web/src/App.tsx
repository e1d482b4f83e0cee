import { useEffect, useState } from 'preact/hooks';
import { getToken, onTokenChange, unauthorizedReason } from './auth.ts';
import { TokenForm } from './components/TokenForm.tsx';
import { FleetPage } from './pages/FleetPage.tsx';
import { NodePage } from './pages/NodePage.tsx';
import { RolloutPage } from './pages/RolloutPage.tsx';
import { RolloutsPage } from './pages/RolloutsPage.tsx';
import { routeOf, useLocation } from './router.ts';

type Theme = 'auto' | 'light' | 'dark';
const themeKey = 'converge.theme';

function useTheme(): [Theme, (t: Theme) => void] {
  const [theme, setTheme] = useState<Theme>(() => (localStorage.getItem(themeKey) as Theme | null) ?? 'auto');
  useEffect(() => {
    if (theme === 'auto') document.documentElement.removeAttribute('data-theme');
    else document.documentElement.setAttribute('data-theme', theme);
    localStorage.setItem(themeKey, theme);
  }, [theme]);
  return [theme, setTheme];
}

export function App() {
  const url = useLocation();
  const route = routeOf(url.pathname);
  const [theme, setTheme] = useTheme();
  const [tokenOpen, setTokenOpen] = useState(false);
  const [hasToken, setHasToken] = useState(getToken() !== null);
  const [needed, setNeeded] = useState<string | null>(unauthorizedReason());
  useEffect(
    () =>
      onTokenChange(() => {
        setHasToken(getToken() !== null);
        setNeeded(unauthorizedReason());
      }),
    [],
  );
  useEffect(() => {
    document.title =
      route.page === 'node'
        ? `${route.node} · Converge`
        : route.page === 'rollout'
          ? `Rollout ${route.rollout} · Converge`
          : route.page === 'rollouts'
            ? 'Rollouts · Converge'
            : 'Fleet · Converge';
  }, [route.page, route.page === 'node' ? route.node : route.page === 'rollout' ? route.rollout : '']);

  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href="/">
          <img src="/favicon.svg" alt="" width={20} height={20} /> Converge
        </a>
        <nav aria-label="Pages">
          <a href="/" aria-current={route.page === 'fleet' ? 'page' : undefined}>
            Fleet
          </a>
          <a href="/rollouts" aria-current={route.page === 'rollouts' || route.page === 'rollout' ? 'page' : undefined}>
            Rollouts
          </a>
        </nav>
        <div class="top-actions">
          <button type="button" aria-expanded={tokenOpen} aria-controls="token-panel" onClick={() => setTokenOpen((o) => !o)}>
            {hasToken ? 'Token set' : 'Set token'}
          </button>
          <label>
            <span class="sr-only">Theme</span>
            <select value={theme} onChange={(e) => setTheme((e.currentTarget as HTMLSelectElement).value as Theme)} aria-label="Theme">
              <option value="auto">Theme: system</option>
              <option value="light">Theme: light</option>
              <option value="dark">Theme: dark</option>
            </select>
          </label>
        </div>
      </header>
      {tokenOpen && needed === null && (
        <div id="token-panel">
          <TokenForm reason={null} onDone={() => setTokenOpen(false)} />
        </div>
      )}
      <main id="main" tabIndex={-1}>
        {needed !== null ? (
          // The API refused to answer without a (valid) token: the page could only say "Loading…"
          // and "Disconnected", so it waits unmounted and the prompt takes its place.
          <TokenForm
            reason={hasToken ? `The API refused this token: ${needed}.` : `The API needs a bearer token: ${needed}.`}
            onDone={() => setTokenOpen(false)}
          />
        ) : (
          <>
            {route.page === 'fleet' && <FleetPage url={url} />}
            {route.page === 'node' && <NodePage key={route.node} node={route.node} url={url} />}
            {route.page === 'rollouts' && <RolloutsPage url={url} />}
            {route.page === 'rollout' && <RolloutPage key={route.rollout} id={route.rollout} url={url} />}
            {route.page === 'missing' && (
              <p>
                No page at <code>{route.path}</code>. <a href="/">Back to the fleet</a>.
              </p>
            )}
          </>
        )}
      </main>
      <footer class="foot muted">
        Times are local ({Intl.DateTimeFormat().resolvedOptions().timeZone}). Data: <a href="/v1/openapi.json">/v1</a>.
      </footer>
    </>
  );
}
