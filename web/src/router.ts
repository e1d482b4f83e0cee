import { useEffect, useState } from 'preact/hooks';

// The pages and their paths: / and /nodes/:node; /rollouts and /rollouts/:id. Links are plain anchors; a click on one
// is turned into history.pushState so the page is not reloaded. State that matters to a reader
// (filters, "as of") lives in the query string so a link can be shared; the token never does.

export type Route = Readonly<
  | { page: 'fleet' }
  | { page: 'node'; node: string }
  | { page: 'rollouts' }
  | { page: 'rollout'; rollout: string }
  | { page: 'missing'; path: string }
>;

export function routeOf(pathname: string): Route {
  if (pathname === '/' || pathname === '') return { page: 'fleet' };
  const m = /^\/nodes\/([^/]+)\/?$/.exec(pathname);
  if (m !== null) return { page: 'node', node: decodeURIComponent(m[1]!) };
  if (/^\/rollouts\/?$/.test(pathname)) return { page: 'rollouts' };
  const r = /^\/rollouts\/([^/]+)\/?$/.exec(pathname);
  if (r !== null) return { page: 'rollout', rollout: decodeURIComponent(r[1]!) };
  return { page: 'missing', path: pathname };
}

const listeners = new Set<() => void>();
const notify = (): void => listeners.forEach((l) => l());
window.addEventListener('popstate', notify);

export function navigate(href: string, replace = false): void {
  if (replace) history.replaceState(null, '', href);
  else history.pushState(null, '', href);
  notify();
  if (!replace) window.scrollTo(0, 0);
}

/** Same-origin clicks on <a href="/…"> without modifier keys stay in the page. */
export function interceptLinks(): void {
  document.addEventListener('click', (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const a = (e.target as Element | null)?.closest('a');
    if (a === null || a === undefined || a.target !== '' || a.origin !== location.origin || a.hasAttribute('download')) return;
    if (!a.pathname.startsWith('/') || a.pathname.startsWith('/v1/')) return;
    e.preventDefault();
    navigate(a.pathname + a.search);
  });
}

export function useLocation(): URL {
  const [url, setUrl] = useState(() => new URL(location.href));
  useEffect(() => {
    const l = (): void => setUrl(new URL(location.href));
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return url;
}

/** Replace some query parameters of the current URL (null removes one) without a new history entry. */
export function setQuery(params: Record<string, string | null>): void {
  const u = new URL(location.href);
  for (const [k, v] of Object.entries(params)) {
    if (v === null || v === '') u.searchParams.delete(k);
    else u.searchParams.set(k, v);
  }
  navigate(u.pathname + u.search, true);
}

export const nodeHref = (node: string): string => `/nodes/${encodeURIComponent(node)}`;
export const rolloutHref = (id: string): string => `/rollouts/${encodeURIComponent(id)}`;
