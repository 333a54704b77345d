import { StrictMode, useEffect, useState, type FormEvent } from 'react';
import { createRoot } from 'react-dom/client';
import { get, session } from './api.js';
import { href, useRoute } from './route.js';
import { OverviewPage } from './pages/overview.js';
import { MachinePage, MachinesPage } from './pages/machines.js';
import { DeploymentPage, DeploymentsPage } from './pages/deployments.js';
import { TaskPage, TasksPage } from './pages/tasks.js';
import { UsagePage } from './pages/usage.js';
import './styles.css';

interface Whoami {
  id: string;
  name: string;
  role: 'operator' | 'admin' | 'member';
}

function SignIn({ onSignedIn }: { onSignedIn: (who: Whoami) => void }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string>();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    session.signIn(token.trim());
    get<Whoami>('/api/v1/workspace').then(onSignedIn, (err: unknown) => {
      session.signOut();
      setError(err instanceof Error ? err.message : String(err));
    });
  };
  return (
    <form className="sign-in card" onSubmit={submit}>
      <h1>Tern</h1>
      <label>
        API token
        <input name="token" type="password" autoComplete="off" value={token} onChange={(e) => setToken(e.target.value)} required />
      </label>
      <p className="muted">Kept in this browser tab only (session storage).</p>
      <button type="submit">Sign in</button>
      {error && (
        <p className="error" role="alert">
          {error}
        </p>
      )}
    </form>
  );
}

const NAV = [
  ['overview', 'Overview'],
  ['machines', 'Machines'],
  ['deployments', 'Deployments'],
  ['tasks', 'Tasks'],
  ['usage', 'Usage & rewards'],
] as const;

function Page({ route, who }: { route: string[]; who: Whoami }) {
  const [section = 'overview', id] = route;
  switch (section) {
    case 'machines':
      return id ? <MachinePage id={id} operator={who.role === 'operator'} /> : <MachinesPage />;
    case 'deployments':
      return id ? <DeploymentPage name={id} /> : <DeploymentsPage />;
    case 'tasks':
      return id ? <TaskPage id={id} /> : <TasksPage />;
    case 'usage':
      return <UsagePage operator={who.role === 'operator'} />;
    default:
      return <OverviewPage />;
  }
}

function App() {
  const route = useRoute();
  // undefined: a token from earlier in this tab is being checked.
  const [who, setWho] = useState<Whoami | null | undefined>(session.token() ? undefined : null);
  useEffect(() => {
    if (who !== undefined) return;
    get<Whoami>('/api/v1/workspace').then(setWho, () => {
      session.signOut();
      setWho(null);
    });
  }, [who]);
  if (who === undefined) return <p className="muted">Signing in…</p>;
  if (who === null) return <SignIn onSignedIn={setWho} />;
  const section = route[0] ?? 'overview';
  return (
    <>
      <header>
        <strong className="brand">Tern</strong>
        <nav>
          {NAV.map(([key, title]) => (
            <a key={key} href={href(key)} className={section === key ? 'active' : undefined}>
              {title}
            </a>
          ))}
        </nav>
        <span className="who" data-testid="who">
          {who.name} · {who.role}
        </span>
        <button
          className="link"
          onClick={() => {
            session.signOut();
            setWho(null);
          }}
        >
          Sign out
        </button>
      </header>
      <main>
        <Page route={route} who={who} />
      </main>
    </>
  );
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
