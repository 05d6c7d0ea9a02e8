import { useEffect, useState } from 'preact/hooks';
import { Link, Redirect, Route, Router, Switch, useLocation } from 'wouter-preact';
import { createApi, type Organization } from './api';
import { SessionContext, signIn, useSession } from './session-context';
import { storeKey, storedKey } from './session';
import { AgentPage, AgentsPage } from './pages/agents';
import { RunPage } from './pages/run';
import { RunsPage } from './pages/runs';
import { OperationsPage } from './pages/operations';
import { SignInPage } from './pages/sign-in';

export function App() {
  const [session, setSession] = useState<{ key: string; org: Organization } | null>(null);
  const [restoring, setRestoring] = useState(() => storedKey() !== null);
  useEffect(() => {
    const key = storedKey();
    if (!key) return;
    signIn(key)
      .then((org) => setSession({ key, org }))
      .catch(() => storeKey(null))
      .finally(() => setRestoring(false));
  }, []);
  const signOut = () => {
    storeKey(null);
    setSession(null);
  };
  if (restoring) return <main class="container" aria-busy="true" />;
  return (
    <Router base="/console">
      {session ? (
        <SessionContext.Provider value={{ api: createApi(session.key), org: session.org, signOut }}>
          <Shell>
            <Switch>
              <Route path="/agents" component={AgentsPage} />
              <Route path="/agents/:id">{(p) => <AgentPage id={p.id} />}</Route>
              <Route path="/runs" component={RunsPage} />
              <Route path="/runs/:id">{(p) => <RunPage id={p.id} />}</Route>
              <Route path="/operations" component={OperationsPage} />
              <Route path="/signin">
                <Redirect to="/runs" />
              </Route>
              <Route path="/">
                <Redirect to="/runs" />
              </Route>
              <Route>
                <main class="container">
                  <h1>Not found</h1>
                  <p>
                    No console page here. <Link href="/runs">Runs</Link>
                  </p>
                </main>
              </Route>
            </Switch>
          </Shell>
        </SessionContext.Provider>
      ) : (
        <SignInPage
          onSignedIn={(key, org) => {
            storeKey(key);
            setSession({ key, org });
          }}
        />
      )}
    </Router>
  );
}

function Shell(props: { children: preact.ComponentChildren }) {
  const { org, signOut } = useSession();
  const [location] = useLocation();
  const nav = (href: string, label: string) => (
    <li>
      <Link href={href} aria-current={location.startsWith(href) ? 'page' : undefined}>
        {label}
      </Link>
    </li>
  );
  return (
    <>
      <header class="container">
        <nav aria-label="Main">
          <ul>
            <li>
              <strong>AaaS console</strong>
            </li>
          </ul>
          <ul>
            {nav('/agents', 'Agents')}
            {nav('/runs', 'Runs')}
            {nav('/operations', 'Operations')}
            <li>
              <span class="muted" title={org.id}>
                {org.slug}
              </span>
            </li>
            <li>
              <button type="button" class="secondary outline small" onClick={signOut}>
                Sign out
              </button>
            </li>
          </ul>
        </nav>
      </header>
      {props.children}
    </>
  );
}
