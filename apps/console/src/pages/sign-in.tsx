import { useState } from 'preact/hooks';
import { ApiError, type Organization } from '../api';
import { signIn } from '../session-context';

export function SignInPage(props: { onSignedIn(key: string, org: Organization): void }) {
  const [key, setKey] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const org = await signIn(key.trim());
      props.onSignedIn(key.trim(), org);
    } catch (err) {
      if (err instanceof ApiError && err.status === 403) {
        setError('This API key cannot use the console: it lacks the admin scope (an a2a:invoke key can call agents, not administer them). Sign in with an admin key.');
      } else if (err instanceof ApiError && err.status === 401) {
        setError('This API key is not valid (unknown or revoked).');
      } else {
        setError(err instanceof Error ? err.message : String(err));
      }
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="container narrow">
      <h1>AaaS console</h1>
      <form onSubmit={submit}>
        <label>
          Organization API key
          <input
            name="apiKey"
            type="password"
            autocomplete="off"
            placeholder="aaas_…"
            required
            value={key}
            onInput={(e) => setKey((e.target as HTMLInputElement).value)}
            aria-invalid={error ? 'true' : undefined}
            aria-describedby="key-help"
          />
          <small id="key-help">Kept in this tab only (session storage) and sent as a header; never in a URL or cookie.</small>
        </label>
        <button type="submit" aria-busy={busy} disabled={busy}>
          Sign in
        </button>
      </form>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </main>
  );
}
