/**
 * The one cluster of the system tests and of the vitest files that need a deployment: a database (a
 * private Postgres, or a fresh database on a server; with or without PgBouncer), N HTTP instances and M
 * worker processes of this repository's server, and real nginx round-robin in front of the instances. Every process is a `ClusterProcess` that the test may
 * kill or restart; an exit the test did not cause is recorded in `unexpectedExits`.
 */
import { freePort } from '../ports.ts';
import {
  openDatabase,
  poolerFromEnv,
  type DatabaseOptions,
  type Pooler,
  type SystemDatabase,
} from './database.ts';
import { startNginx, type Nginx } from './nginx.ts';
import { Processes, waitHttp, type ClusterProcess, type UnexpectedExit } from './processes.ts';

export { ClusterProcess, ROOT, startCommand, waitHttp, type Command } from './processes.ts';
export { startNginx, type Nginx } from './nginx.ts';
export type { SystemDatabase } from './database.ts';

export interface ClusterOptions {
  /** Names the temporary directory or database. */
  name: string;
  /** HTTP instances (default 2). */
  instances?: number;
  /** Worker processes (default 2). */
  workers?: number;
  /** PgBouncer between the processes and Postgres; by default what CLUSTER_POOLER says (none if unset). */
  pooler?: Pooler;
  /** Real nginx in front of the instances (default true). */
  nginx?: boolean;
  /** nginx's port, when the processes must know it before it starts (their PUBLIC_URL); default a free one. */
  nginxPort?: number;
  /** Where the database lives: a private Postgres (default) or a fresh database on a server. */
  postgres?: DatabaseOptions['postgres'];
  /** Settings of the private Postgres (e.g. max_connections). */
  postgresSettings?: Record<string, string>;
  /** Environment of every process (over the database settings). */
  env?: Record<string, string>;
  /**
   * Runs once the database is up, before any process starts (roles, a migration as the owner); what it
   * returns is added to every process's environment.
   */
  prepare?: (database: SystemDatabase) => Promise<Record<string, string> | void>;
  /** An HTTP instance's script and arguments (default `src/main.ts --role=server`); PORT is set. */
  instance?: string[];
  /** A worker's script and arguments (default `workers/main.ts`). */
  worker?: string[];
  /** Environment of the workers only, over `env` (e.g. METRICS_PORT, with one worker). */
  workerEnv?: Record<string, string>;
  /** Node flags of every process (e.g. `--expose-gc`). */
  nodeArgs?: string[];
  /** Node flags of the workers only, after `nodeArgs` (e.g. `--max-semi-space-size=8`, as `npm run worker`). */
  workerNodeArgs?: string[];
}

export interface Cluster {
  /** The MCP endpoint clients use: nginx's, or the first instance's without nginx. */
  readonly url: string;
  readonly database: SystemDatabase;
  readonly nginx: Nginx | undefined;
  readonly http: readonly ClusterProcess[];
  /** The HTTP instances' ports, in the order of `http`. */
  readonly ports: readonly number[];
  readonly workers: readonly ClusterProcess[];
  /** Exits no test step asked for. */
  readonly unexpectedExits: readonly UnexpectedExit[];
  /** Stops every process, nginx, the pooler and the database (its temporary files too). */
  stop(): Promise<void>;
}

/**
 * Starts the cluster: the database, then the first HTTP instance (it migrates), then the other
 * instances and the workers, then nginx; resolves once every instance and nginx answer HTTP.
 */
export async function startCluster(opts: ClusterOptions): Promise<Cluster> {
  const database = await openDatabase({
    name: opts.name,
    pooler: opts.pooler ?? poolerFromEnv(),
    ...(opts.postgres === undefined ? {} : { postgres: opts.postgres }),
    ...(opts.postgresSettings === undefined ? {} : { settings: opts.postgresSettings }),
  });
  const procs = new Processes({ ...UNMETERED_ENV, ...database.env, ...opts.env });
  const http: ClusterProcess[] = [];
  const workers: ClusterProcess[] = [];
  let nginx: Nginx | undefined;
  const nodeArgs = opts.nodeArgs ?? [];
  const stop = async () => {
    await procs.stopAll();
    await nginx?.stop();
    await database.stop();
  };
  try {
    Object.assign(procs.baseEnv, await opts.prepare?.(database));
    const ports: number[] = [];
    for (let i = 0; i < (opts.instances ?? 2); i++) ports.push(await freePort());
    const startHttp = (i: number) =>
      procs.start(`http-${i + 1}`, {
        args: opts.instance ?? ['src/main.ts', '--role=server'],
        env: { PORT: String(ports[i]) },
        port: ports[i]!,
        nodeArgs,
      });
    // The first instance migrates; then the rest start.
    if (ports.length > 0) {
      http.push(startHttp(0));
      await waitHttp(ports[0]!);
    }
    for (let i = 1; i < ports.length; i++) http.push(startHttp(i));
    for (let i = 0; i < (opts.workers ?? 2); i++)
      workers.push(
        procs.start(`worker-${i + 1}`, {
          args: opts.worker ?? ['workers/main.ts'],
          env: opts.workerEnv ?? {},
          nodeArgs: [...nodeArgs, ...(opts.workerNodeArgs ?? [])],
        }),
      );
    await Promise.all(ports.map((p) => waitHttp(p)));
    if (opts.nginx ?? true) nginx = await startNginx(ports, opts.nginxPort);
    return {
      url: nginx?.url ?? `http://127.0.0.1:${ports[0]}/mcp`,
      database,
      nginx,
      http,
      ports,
      workers,
      unexpectedExits: procs.unexpectedExits,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * The settings of a cluster under fault injection: short leases and sweeps so a killed worker's tasks
 * move on within seconds, quick connect timeouts so a dead Postgres is noticed.
 */
export const CHAOS_ENV = {
  LOG_LEVEL: 'warn',
  TASK_POLL_INTERVAL_MS: '50',
  LEASE_MS: '2000',
  SWEEP_INTERVAL_MS: '500',
  WORKER_CONCURRENCY: '16',
  SHUTDOWN_GRACE_MS: '3000',
  DB_CONNECT_TIMEOUT_MS: '1000',
} as const;

/**
 * These runs load one principal far past the per-principal quotas (their own tests are in
 * test/tasks/fair-share.test.ts): what they check is durability and throughput, not admission.
 */
export const UNMETERED_ENV = {
  MAX_ACTIVE_TASKS_PER_PRINCIPAL: '10000000',
  TASK_CREATE_RATE_PER_SECOND: '0',
  MAX_SESSIONS_PER_PRINCIPAL: '10000000',
} as const;

/** A log line prefixed with the seconds since the test started. */
export function timedLog(t0 = Date.now()): (msg: string) => void {
  return (msg) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${msg}`);
}
