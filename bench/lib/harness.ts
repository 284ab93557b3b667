// What every scenario of bench/run.ts needs: a scratch database, real processes, a load generator
// (autocannon), pgbench, and the table the run prints. Nothing here asserts: a benchmark prints.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import pg from 'pg';
import { createLogger } from '../../src/log.ts';
import { migrateDatabase } from '../../src/migrate.ts';
import { mcpHeaders, mcpRequest, TASKS_EXT } from '../../test/helpers/mcp.ts';
import { freePort } from '../../test/helpers/ports.ts';

export const ROOT = path.resolve(import.meta.dirname, '../..');
export const ADMIN_URL =
  process.env.BENCH_ADMIN_URL ??
  process.env.ADMIN_DATABASE_URL ??
  'postgres://postgres@127.0.0.1:5432/postgres';
export const DURATION = Number(process.env.BENCH_DURATION ?? 10);
export const WARMUP = Number(process.env.BENCH_WARMUP ?? 3);
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);

export interface ScratchDb {
  url: string;
  name: string;
  sql<T extends pg.QueryResultRow = Record<string, unknown>>(text: string, values?: unknown[]): Promise<T[]>;
  drop(): Promise<void>;
}

/** A fresh database on the bench Postgres, migrated (our schema, pg-boss's, the run queue). */
export async function scratchDb(label: string): Promise<ScratchDb> {
  const name = `bench_${label.replace(/\W/g, '_')}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  await migrateDatabase({ connectionString: url.toString(), log: createLogger('warn') });
  const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
  return {
    url: url.toString(),
    name,
    sql: async (text, values) => (await pool.query(text, values)).rows,
    async drop() {
      await pool.end();
      const a = new pg.Client({ connectionString: ADMIN_URL });
      await a.connect();
      await a.query(`drop database if exists ${name} with (force)`);
      await a.end();
    },
  };
}

export interface Proc {
  child: ChildProcess;
  port: number;
  /** The last of what it wrote to stderr. */
  stderr(): string;
  stop(): Promise<void>;
}

/** A real process (`node --import tsx <args>`), ready once GET /readyz answers 200 (or it prints `ready`). */
export async function startProc(
  args: string[],
  env: Record<string, string>,
  opts: { nodeArgs?: string[]; ready?: 'readyz' | 'stdout' | 'none' } = {},
): Promise<Proc> {
  const port = env.PORT === undefined ? await freePort() : Number(env.PORT);
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), '--import', 'tsx', ...args], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'warn', LOG_FORMAT: 'json', ...env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  let out = '';
  child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-200_000)));
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 60_000;
  const mode = opts.ready ?? 'readyz';
  while (mode !== 'none') {
    if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited:\n${err.slice(-3000)}`);
    if (mode === 'stdout' && out.includes('ready')) break;
    if (mode === 'readyz') {
      const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
    }
    if (Date.now() > deadline) throw new Error(`${args.join(' ')} never became ready:\n${err.slice(-3000)}`);
    await sleep(100);
  }
  return {
    child,
    port,
    stderr: () => err,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await Promise.race([exited, sleep(15_000).then(() => child.kill('SIGKILL'))]);
      await exited;
    },
  };
}

/** The headers of a 2026-07-28 request (the shared client helper's), `Mcp-Name` given as is. */
export const MCP_HEADERS = (method: string, name?: string): Record<string, string> =>
  mcpHeaders(method, {}, name === undefined ? {} : { 'mcp-name': name });

export const TASK_CAPS = { extensions: { [TASKS_EXT]: {} } };

/** A 2026-07-28 request's body with its `_meta` envelope (the shared client helper's), id 1. */
export function rpcBody(method: string, params: Record<string, unknown>, caps: object = TASK_CAPS): string {
  return JSON.stringify(mcpRequest(method, params, { id: 1, caps: caps as Record<string, unknown> }));
}

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  /** Requests that failed or answered outside 2xx. */
  bad: number;
  total: number;
}

/** autocannon against one request, after a warm-up run whose numbers are thrown away. */
export async function load(
  url: string,
  request: { method?: 'POST' | 'GET'; headers?: Record<string, string>; body?: string },
  opts: {
    connections?: number;
    duration?: number;
    warmup?: number;
    /** Headers of each connection's own (a session each), over `request.headers`, handed out in turn. */
    perConnection?: readonly Record<string, string>[];
    /** Every request gets a JSON-RPC id of its own: `[<id>]` in the body is replaced (autocannon's). */
    uniqueIds?: boolean;
  } = {},
): Promise<LoadResult> {
  const run = (duration: number) => {
    let next = 0;
    const each = opts.perConnection ?? [];
    return autocannon({
      url,
      method: request.method ?? 'POST',
      headers: request.headers ?? {},
      ...(request.body === undefined ? {} : { body: request.body }),
      connections: opts.connections ?? CONNECTIONS,
      duration,
      idReplacement: opts.uniqueIds === true,
      ...(each.length === 0
        ? {}
        : {
            setupClient: (client: autocannon.Client) =>
              client.setHeaders({ ...request.headers, ...each[next++ % each.length] }),
          }),
    });
  };
  const warmup = opts.warmup ?? WARMUP;
  if (warmup > 0) await run(warmup);
  const r = await run(opts.duration ?? DURATION);
  return {
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    // autocannon's `errors` include its timeouts.
    bad: r.errors + r.non2xx,
    total: r.requests.total,
  };
}

/** pgbench with a custom script; its tps (without connection time). */
export function pgbench(
  dbUrl: string,
  script: string,
  args: string[],
): { tps: number; output: string } | undefined {
  if (spawnSync('pgbench', ['--version']).status !== 0) return undefined;
  const file = path.join(tmpdir(), `bench-${randomBytes(4).toString('hex')}.sql`);
  writeFileSync(file, script);
  const r = spawnSync('pgbench', ['-n', '-f', file, ...args, dbUrl], { encoding: 'utf8' });
  const output = `${r.stdout}${r.stderr}`;
  const tps = /tps = ([\d.]+) \(without initial connection time\)/.exec(output)?.[1];
  if (r.status !== 0 || tps === undefined) throw new Error(`pgbench failed:\n${output}`);
  return { tps: Number(tps), output };
}

/** How many turns `interleaved` loads take (BENCH_ROUNDS, default 3). */
export const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

/**
 * Measures `targets` side by side on a noisy machine: ROUNDS rounds in which each takes its turn (each
 * turn typically DURATION / ROUNDS long); each target's results, round by round.
 */
export async function interleaved<T>(targets: ReadonlyArray<() => Promise<T>>): Promise<T[][]> {
  const rounds: T[][] = targets.map(() => []);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, target] of targets.entries()) rounds[i]!.push(await target());
  }
  return rounds;
}

/** A load's rounds as one figure: the rate over all of them, the median p50, the worst p99. */
export function combineLoads(rounds: readonly LoadResult[]): LoadResult {
  const sorted = rounds.map((r) => r.p50).sort((x, y) => x - y);
  return {
    rps: rounds.reduce((sum, r) => sum + r.rps, 0) / rounds.length,
    p50: sorted[Math.floor(sorted.length / 2)]!,
    p99: Math.max(...rounds.map((r) => r.p99)),
    bad: rounds.reduce((sum, r) => sum + r.bad, 0),
    total: rounds.reduce((sum, r) => sum + r.total, 0),
  };
}

/** A SQL literal for pgbench's simple protocol. */
export function literal(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  const text =
    value instanceof Date ? value.toISOString() : typeof value === 'string' ? value : JSON.stringify(value);
  return `'${text.replaceAll("'", "''")}'`;
}

/** A statement with its $n parameters written in as literals. */
export function inline(text: string, values: readonly unknown[]): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => literal(values[Number(n) - 1]));
}

/** RSS and live heap of a server process, as it logs them on SIGUSR2 (after a full GC with --expose-gc). */
export async function memoryOf(proc: Proc): Promise<{ rss: number; heapUsed: number }> {
  const before = proc.stderr().length;
  proc.child.kill('SIGUSR2');
  const deadline = Date.now() + 10_000;
  for (;;) {
    const lines = proc.stderr().slice(before).split('\n');
    const line = lines.find((l) => l.includes('"msg":"memory"'));
    if (line !== undefined) {
      const m = JSON.parse(line) as { rss: number; heapUsed: number };
      return { rss: m.rss, heapUsed: m.heapUsed };
    }
    if (Date.now() > deadline) throw new Error('no memory line');
    await sleep(50);
  }
}

export interface Row {
  scenario: string;
  ours: string;
  floor: string;
  ratio: string;
  target: string;
}

export const rows: Row[] = [];

export function printTable(): void {
  const header: Row = {
    scenario: 'scenario',
    ours: 'ours',
    floor: 'floor (same run)',
    ratio: 'ratio',
    target: 'target',
  };
  const all = [header, ...rows];
  const width = (k: keyof Row) => Math.max(...all.map((r) => r[k].length));
  const line = (r: Row) =>
    `| ${(['scenario', 'ours', 'floor', 'ratio', 'target'] as const).map((k) => r[k].padEnd(width(k))).join(' | ')} |`;
  console.log(line(header));
  console.log(
    `| ${(['scenario', 'ours', 'floor', 'ratio', 'target'] as const).map((k) => '-'.repeat(width(k))).join(' | ')} |`,
  );
  for (const r of rows) console.log(line(r));
}

export const fmt = {
  /** Requests/s with p50 and p99, and how many failed when any did (a rate of errors is no rate). */
  rps: (r: LoadResult) =>
    `${Math.round(r.rps).toLocaleString('en')} req/s (p50 ${r.p50} ms, p99 ${r.p99} ms` +
    `${r.bad > 0 ? `; ${r.bad.toLocaleString('en')} of ${r.total.toLocaleString('en')} failed` : ''})`,
  x: (n: number) => `${n.toFixed(2)}×`,
  mb: (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`,
};
