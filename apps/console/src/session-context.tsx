import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import { ApiError, createApi, type Api, type Organization } from './api';

export interface Session {
  api: Api;
  org: Organization;
  signOut(): void;
}

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error('no session');
  return s;
}

/**
 * Checks a key against the admin API: the organization it belongs to, or an ApiError
 * (401 unknown/revoked key, 403 a key without the admin scope, e.g. an invoke-only key).
 */
export async function signIn(key: string): Promise<Session['org']> {
  return createApi(key).get<Organization>('/v1/organization');
}

/** An API error as a sentence (code and message, as the API said them). */
export function ErrorNote(props: { error: unknown }) {
  if (!props.error) return null;
  const e = props.error;
  const text = e instanceof ApiError ? `${e.message} (${e.code})` : e instanceof Error ? e.message : String(e);
  return (
    <p class="error" role="alert">
      {text}
    </p>
  );
}
