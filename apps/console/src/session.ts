/**
 * The signed-in API key. Kept in sessionStorage (this tab only, gone when it closes) and sent as
 * the X-API-Key header: never in a URL or a cookie.
 */
const KEY = 'aaas.console.apiKey';

export function storedKey(): string | null {
  try {
    return sessionStorage.getItem(KEY);
  } catch {
    return null;
  }
}

export function storeKey(key: string | null): void {
  try {
    if (key === null) sessionStorage.removeItem(KEY);
    else sessionStorage.setItem(KEY, key);
  } catch {
    // storage refused (private mode): the key lives in memory only, until reload
  }
}
