// The dashboard asks for a bearer token once and keeps it in session storage (gone
// when the tab closes). It travels only in the Authorization header: never in a URL, a log or
// local storage.

const key = 'converge.token';

export function getToken(): string | null {
  try {
    return sessionStorage.getItem(key);
  } catch {
    return null;
  }
}

export function setToken(token: string | null): void {
  try {
    if (token === null || token === '') sessionStorage.removeItem(key);
    else sessionStorage.setItem(key, token);
  } catch {
    // storage disabled: the token lives as long as the page
  }
  unauthorized = null;
  listeners.forEach((l) => l());
}

// The one place the page asks for a token: any 401 from the API says so here, and the header
// shows a single form (not one per panel).
let unauthorized: string | null = null;
export function reportUnauthorized(reason: string): void {
  if (unauthorized !== null) return;
  unauthorized = reason;
  listeners.forEach((l) => l());
}
export const unauthorizedReason = (): string | null => unauthorized;

const listeners = new Set<() => void>();
export function onTokenChange(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
