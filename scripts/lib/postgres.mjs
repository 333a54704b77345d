import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  appendFileSync,
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
  lstatSync,
} from 'node:fs';
import { join } from 'node:path';
import { UserError } from './log.mjs';
import { isRoot, lookupUser, run, which } from './proc.mjs';
import { tail } from './logs.mjs';

/** The directory holding initdb, pg_ctl and postgres (TERN_PG_BINDIR, pg_config, /usr/lib/postgresql/N/bin, PATH). */
export function findPgBin() {
  const has = (dir) => dir && existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl')) && existsSync(join(dir, 'postgres'));
  const candidates = [process.env.TERN_PG_BINDIR];
  const pgConfig = which('pg_config');
  if (pgConfig) {
    try {
      candidates.push(execFileSync(pgConfig, ['--bindir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
    } catch {
      /* pg_config without a server */
    }
  }
  try {
    const versions = readdirSync('/usr/lib/postgresql')
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((v) => `/usr/lib/postgresql/${v}/bin`));
  } catch {
    /* not Debian-style */
  }
  const initdb = which('initdb');
  if (initdb) candidates.push(join(initdb, '..'));
  return candidates.find(has);
}

/** Postgres refuses to run as root: as root, its commands run as the `postgres` user. */
function pgUser() {
  if (!isRoot()) return undefined;
  const user = lookupUser('postgres');
  if (!user)
    throw new UserError(
      'running as root but there is no "postgres" user to run a private PostgreSQL as (apt-get install postgresql creates it)',
    );
  return user;
}

function asPg(cmd, args) {
  return isRoot() ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
}

/**
 * Where the private cluster lives: <state>/postgres, unless the postgres user cannot reach it
 * (a checkout under /root, mode 700) or the socket path would be too long for a Unix socket;
 * then under /var/lib/tern (root) or the temp dir, keyed by the state dir.
 */
/** Where root's private clusters live when the state directory is closed to the postgres user. */
const SHARED_PG_PARENT = '/var/lib/tern';

export async function choosePgDir(stateDir, preferred) {
  if (preferred && existsSync(preferred)) return preferred;
  const inside = join(stateDir, 'postgres');
  const sockLen = join(inside, 'run', '.s.PGSQL.65535').length;
  let reachable = sockLen < 100;
  if (reachable && isRoot()) {
    mkdirSync(stateDir, { recursive: true });
    const probe = await run('runuser', ['-u', 'postgres', '--', 'test', '-x', stateDir], { capture: true });
    reachable = probe.code === 0;
  }
  if (reachable) return inside;
  const key = createHash('sha256').update(stateDir).digest('hex').slice(0, 10);
  if (!isRoot()) return join('/tmp', `tern-postgres-${key}`);
  // The postgres user must pass through it to its own (mode 700) directory: without this, the
  // cluster's directory made below with mode 700 would make /var/lib/tern 700 too, and initdb fails.
  mkdirSync(SHARED_PG_PARENT, { recursive: true });
  chmodSync(SHARED_PG_PARENT, 0o711);
  return join(SHARED_PG_PARENT, `postgres-${key}`);
}

function pgFiles(dir) {
  return { data: join(dir, 'data'), sock: join(dir, 'run'), log: join(dir, 'postgres.log') };
}

/** Builds a libpq URL. */
export function postgresUrl({ password, port, database, host = '127.0.0.1' }) {
  return `postgres://postgres:${encodeURIComponent(password)}@${host}:${port}/${database}`;
}

/**
 * Starts (initialising once) a private PostgreSQL cluster in `dir`: TCP on 127.0.0.1:port only
 * (password auth), Unix socket inside `dir` (trust, owner only), creates `database` and sets
 * the postgres user's password. Resolves { port, url, dir, pid }.
 */
export async function startPostgres({ dir, port, database, password, logLink }) {
  const bin = findPgBin();
  if (!bin) throw new UserError('PostgreSQL server binaries not found (apt-get install postgresql, or set DATABASE_URL)');
  const user = pgUser();
  const f = pgFiles(dir);
  mkdirSync(f.sock, { recursive: true, mode: 0o700 });
  if (user) for (const p of [dir, f.sock]) chownSync(p, user.uid, user.gid);
  if (!existsSync(f.log)) {
    writeFileSync(f.log, '');
    if (user) chownSync(f.log, user.uid, user.gid);
  }
  if (logLink) linkLog(f.log, logLink);

  if (!existsSync(join(f.data, 'PG_VERSION'))) {
    const [cmd, args] = asPg(join(bin, 'initdb'), [
      '-D',
      f.data,
      '-U',
      'postgres',
      '-E',
      'UTF8',
      '--locale=C',
      '--auth-local=trust',
      '--auth-host=scram-sha-256',
    ]);
    const res = await run(cmd, args, { capture: true, cwd: dir });
    if (res.code !== 0) throw new UserError(`initdb failed:\n${res.output.trim()}`);
    appendFileSync(
      join(f.data, 'postgresql.conf'),
      "\n# Written by Tern's scripts/up.mjs on every start.\ninclude_if_exists = 'tern.conf'\n",
    );
  }
  const conf = join(f.data, 'tern.conf');
  writeFileSync(
    conf,
    `port = ${port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '${f.sock}'\nunix_socket_permissions = 0700\nmax_connections = 200\n`,
  );
  if (user) chownSync(conf, user.uid, user.gid);

  const [cmd, args] = asPg(join(bin, 'pg_ctl'), ['-D', f.data, '-l', f.log, '-w', '-t', '60', 'start']);
  const started = await run(cmd, args, { capture: true, cwd: dir });
  if (started.code !== 0) {
    throw new UserError(`private PostgreSQL did not start on port ${port}:\n${started.output.trim()}\n${f.log}:\n${tail(f.log, 15)}`);
  }

  const psql = (sql, db = 'postgres') =>
    run(
      join(bin, 'psql'),
      ['-X', '-q', '-h', f.sock, '-p', String(port), '-U', 'postgres', '-d', db, '-At', '-v', 'ON_ERROR_STOP=1', '-c', sql],
      {
        capture: true,
        cwd: dir,
      },
    );
  const lit = (s) => `'${String(s).replace(/'/g, "''")}'`;
  for (const sql of [`ALTER USER postgres PASSWORD ${lit(password)}`, `SELECT 1 FROM pg_database WHERE datname = ${lit(database)}`]) {
    const res = await psql(sql);
    if (res.code !== 0) throw new UserError(`private PostgreSQL: ${sql.split(' ')[0]} failed:\n${res.output.trim()}`);
    if (sql.startsWith('SELECT') && res.output.trim() !== '1') {
      const created = await psql(`CREATE DATABASE "${database}"`);
      if (created.code !== 0) throw new UserError(`could not create database ${database}:\n${created.output.trim()}`);
    }
  }
  return { port, dir, url: postgresUrl({ password, port, database }), pid: postmasterPid(dir) };
}

export function postmasterPid(dir) {
  try {
    return Number(readFileSync(join(pgFiles(dir).data, 'postmaster.pid'), 'utf8').split('\n')[0]) || undefined;
  } catch {
    return undefined;
  }
}

/** `pg_ctl stop -m fast` when the cluster in `dir` runs. Safe to call when it does not. */
export async function stopPostgres(dir) {
  const f = pgFiles(dir);
  if (!dir || !existsSync(join(f.data, 'postmaster.pid'))) return false;
  const bin = findPgBin();
  if (!bin) return false;
  const [cmd, args] = asPg(join(bin, 'pg_ctl'), ['-D', f.data, '-m', 'fast', '-w', '-t', '30', 'stop']);
  const res = await run(cmd, args, { capture: true, cwd: dir });
  return res.code === 0;
}

function linkLog(target, link) {
  try {
    if (lstatSync(link)) unlinkSync(link);
  } catch {
    /* none */
  }
  try {
    symlinkSync(target, link);
  } catch {
    /* logs dir missing: not worth failing for */
  }
}
