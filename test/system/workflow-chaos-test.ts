/**
 * The workflow chaos run (`npm run test:workflow-chaos`), issue #32 made repeatable: ~200 tasks of
 * test/helpers/workflow-tools.ts, every durable primitive (steps with sleeps and ctx.patched; signals
 * delivered early, on time and after their timeout; ctx.map of 150 items with items failing once and a
 * map failing for good; a step's own retries, the tool's retries, NonRetryableError; 8–16 MiB artifacts
 * downloaded with Range; onExhausted: 'pause' resumed with the operator CLI; `tasks fork --from-step`
 * of finished tasks, signal tasks included) driven through real nginx (deploy/mcp-locations.conf,
 * round-robin) over two HTTP instances and three workers, while a random worker is SIGKILLed every 8 s
 * (and started again), one HTTP instance is SIGKILLed and restarted, and Postgres is restarted once.
 *
 * Then it audits: every result exact; every second delivery of a signal refused with 409; no task
 * lost, stuck or orphaned (nothing active left, map items included), none written terminal twice (a
 * trigger of this test's own records every terminal write); every body (a step's function, a map item,
 * an artifact's source: each logs its start to a file) started neither after its checkpoint nor
 * without its attempt holding the task; every attempt of a finished task ended (ended_at, outcome), one
 * whose worker was SIGKILLed `lease_lost` when its lease lapsed; no step with a retry policy started
 * more than its maxAttempts (task_step_starts, and the bodies' own count); every artifact's SHA-256
 * right. Prints the figures; exits non-zero on any mismatch, saying which.
 *
 *   node --import tsx test/system/workflow-chaos-test.ts
 *   WORKFLOW_TASKS=100 WORKFLOW_MAP_ITEMS=60 …   (smaller; also WORKFLOW_CONCURRENCY, WORKFLOW_KILL_EVERY_MS,
 *                                                WORKFLOW_PG_RESTART=fast|immediate, WORKFLOW_TASK_TIMEOUT_MS)
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { META_IDEMPOTENCY_KEY } from '../../src/core/wire.ts';
import { clientIdempotency } from '../../src/tasks/store/idempotency.ts';
import { runCli, type Run } from '../helpers/cli.ts';
import { freePort } from '../helpers/ports.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  ARTIFACT_NAME,
  artifactSha256,
  expectedMap,
  expectedPause,
  expectedSignal,
  expectedStepRetry,
  expectedSteps,
  expectedToolRetry,
  failsOnce,
  GATE_ATTEMPTS,
  gateFile,
  nonRetryableMessage,
  readStarts,
  type BodyStart,
} from '../helpers/workflow-tools.ts';
import { CHAOS_ENV, startCluster, startNginx, timedLog } from '../helpers/system/cluster.ts';
import { checkAllServing } from '../helpers/system/probes.ts';
import { Workload } from '../helpers/system/workload.ts';

const log = timedLog();
const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const TOTAL = env('WORKFLOW_TASKS', 200);
const MAP_ITEMS = env('WORKFLOW_MAP_ITEMS', 150);
const CONCURRENCY = env('WORKFLOW_CONCURRENCY', 12);
const KILL_EVERY_MS = env('WORKFLOW_KILL_EVERY_MS', 8_000);
const TASK_TIMEOUT_MS = env('WORKFLOW_TASK_TIMEOUT_MS', 150_000);
const PG_RESTART = process.env.WORKFLOW_PG_RESTART === 'immediate' ? 'immediate' : 'fast';
const LEASE_MS = Number(CHAOS_ENV.LEASE_MS);
const MIB = 1_048_576;
const TOOLS = ['--tools', 'test/helpers/workflow-tools.ts'];
const TERMINAL = ['completed', 'failed', 'cancelled'];

// ---------- the cluster: PUBLIC_URL is nginx's, so the links tasks hand out go through it ----------
const logDir = mkdtempSync(path.join(tmpdir(), 'mcp-workflow-chaos-'));
const nginxPort = await freePort();
const publicUrl = `http://127.0.0.1:${nginxPort}`;
const cluster = await startCluster({
  name: 'workflow-chaos',
  instances: 2,
  workers: 3,
  nginx: false,
  env: { ...CHAOS_ENV, PUBLIC_URL: publicUrl, WORKFLOW_LOG_DIR: logDir },
  instance: ['src/main.ts', '--role=server', ...TOOLS],
  worker: ['workers/main.ts', ...TOOLS],
});
const nginx = await startNginx(cluster.ports, nginxPort);
const { http, workers } = cluster;
log(`nginx ${nginx.url} → http :${cluster.ports.join(', :')}; 3 workers; ${cluster.database.describe}`);
log(`bodies log their starts to ${logDir}`);

/** Every terminal write of a task, recorded by the database itself (this test's own trigger). */
async function installTerminalAudit(): Promise<void> {
  const db = await cluster.database.connect();
  try {
    await db.query(`
      create table wf_terminal_writes (task_id text not null, old_status text not null,
        new_status text not null, at timestamptz not null default clock_timestamp());
      create function wf_record_terminal_write() returns trigger language plpgsql as $$
      begin
        insert into wf_terminal_writes (task_id, old_status, new_status) values (new.task_id, old.status, new.status);
        return null;
      end $$;
      create trigger wf_terminal_writes after update on tasks for each row
        when (new.status in ('completed', 'failed', 'cancelled') and (old.status is distinct from new.status
              or old.result is distinct from new.result or old.error is distinct from new.error))
        execute function wf_record_terminal_write();`);
  } finally {
    await db.end();
  }
}
await installTerminalAudit();

// ---------- the client side ----------
/** Its `rpc` (retrying through outages, recording what a client saw) and `poll`; no jobs of its own. */
const client = new Workload({
  url: nginx.url,
  httpPorts: cluster.ports,
  counts: { analyze: 0, confirm: 0, cancel: 0, fail: 0 },
});

type Task = Record<string, any>;
interface Known {
  kind: string;
  tool: string;
  args: Record<string, any>;
  forkOf?: string;
}
/** Every task this run created (tools/call) or forked (the CLI), with what it was. */
const known = new Map<string, Known>();
const keyDigests = new Set<string>();
const outcomes: Array<{ kind: string; taskId?: string; ok: boolean; detail: string }> = [];
const stats = {
  secondDeliveries409: 0,
  secondDeliveries: 0,
  ambiguousFirstDeliveries: 0,
  oldUrlRefused: 0,
  rangePieces: 0,
  cliRuns: 0,
  cliRetries: 0,
};

async function create(kind: string, tool: string, args: Record<string, any>): Promise<string> {
  const key = randomUUID();
  keyDigests.add(clientIdempotency(key, tool, args).key);
  const reply = await client.rpc(
    'tools/call',
    { name: tool, arguments: args },
    { meta: { [META_IDEMPOTENCY_KEY]: key } },
  );
  const taskId = reply.body.result?.taskId as string | undefined;
  if (taskId === undefined)
    throw new Error(`tools/call ${tool} created no task: ${reply.text.slice(0, 300)}`);
  client.acknowledged.add(taskId);
  known.set(taskId, { kind, tool, args });
  return taskId;
}

async function waitTask(taskId: string, until: (t: Task) => boolean, what: string, intervalMs = 250) {
  let last: Task | undefined;
  return waitFor(
    async () => {
      last = (await client.rpc('tasks/get', { taskId })).body.result as Task | undefined;
      return last !== undefined && until(last) && last;
    },
    {
      timeoutMs: TASK_TIMEOUT_MS,
      intervalMs,
      what: () => `task ${taskId} ${what} (last: ${JSON.stringify(last).slice(0, 300)})`,
    },
  );
}
const settled = (taskId: string) => waitTask(taskId, (t) => TERMINAL.includes(t.status as string), 'ending');

function record(kind: string, taskId: string, ok: boolean, detail: () => string): boolean {
  outcomes.push({ kind, taskId, ok, detail: ok ? '' : detail() });
  return ok;
}

/** A failed task's error, as the client sees it. */
const failedWith = (t: Task, message: string) =>
  t.status === 'failed' && t.error?.code === -32603 && t.error?.message === message;

/** POSTs a signal through nginx. A 5xx or a lost reply may hide a delivery that counted: said so. */
async function deliver(
  url: string,
  payload: unknown,
): Promise<{ status: number; text: string; unsure: boolean }> {
  let unsure = false;
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(payload),
      });
      const text = await res.text();
      if (res.status < 500 || Date.now() > deadline) return { status: res.status, text, unsure };
      client.clientErrors.push({ at: Date.now(), method: 'POST /signals', what: `HTTP ${res.status}` });
    } catch (err) {
      if (Date.now() > deadline) throw err;
      client.clientErrors.push({ at: Date.now(), method: 'POST /signals', what: 'transport' });
    }
    unsure = true;
    await sleep(200);
  }
}

/** The first delivery (202; or 409 "already delivered" after a lost reply), then a second: 409. */
async function deliverTwice(url: string, payload: unknown): Promise<string | undefined> {
  const first = await deliver(url, payload);
  const firstOk =
    first.status === 202 ||
    (first.unsure && first.status === 409 && first.text.includes('already delivered'));
  if (first.status !== 202) stats.ambiguousFirstDeliveries++;
  const second = await deliver(url, { n: -1 });
  stats.secondDeliveries++;
  if (second.status === 409) stats.secondDeliveries409++;
  if (!firstOk) return `first delivery: HTTP ${first.status} ${first.text}`;
  if (second.status !== 409) return `second delivery: HTTP ${second.status} ${second.text} (409 expected)`;
  return undefined;
}

const signalUrl = (t: Task) =>
  /(http:\/\/\S+\/signals\/[A-Za-z0-9_-]+)/.exec((t.statusMessage as string) ?? '')?.[1];

/** Downloads an artifact through nginx in three `Range` pieces; the SHA-256 of what came, or what went wrong. */
async function downloadByRanges(url: string, size: number): Promise<{ sha?: string; problem?: string }> {
  const cuts = [0, Math.floor(size / 3), Math.floor((2 * size) / 3), size];
  const hash = createHash('sha256');
  for (let i = 0; i < 3; i++) {
    const [start, end] = [cuts[i]!, cuts[i + 1]! - 1];
    const range = i === 2 ? `bytes=${start}-` : `bytes=${start}-${end}`;
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        const res = await fetch(url, { headers: { range } });
        if (res.status >= 500 && Date.now() < deadline) {
          await res.arrayBuffer();
          client.clientErrors.push({ at: Date.now(), method: 'GET artifact', what: `HTTP ${res.status}` });
          await sleep(200);
          continue;
        }
        const body = Buffer.from(await res.arrayBuffer());
        const contentRange = res.headers.get('content-range');
        if (
          res.status !== 206 ||
          contentRange !== `bytes ${start}-${end}/${size}` ||
          body.length !== end - start + 1
        )
          return {
            problem: `${range}: HTTP ${res.status}, Content-Range ${contentRange}, ${body.length} bytes`,
          };
        hash.update(body);
        stats.rangePieces++;
        break;
      } catch (err) {
        if (Date.now() > deadline) return { problem: `${range}: ${String(err)}` };
        client.clientErrors.push({ at: Date.now(), method: 'GET artifact', what: 'transport' });
        await sleep(200);
      }
    }
  }
  return { sha: hash.digest('hex') };
}

/** The operator CLI against the cluster's database; run again when the database was down. */
async function cli(args: string[]): Promise<Run> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    stats.cliRuns++;
    const run = await runCli(args, {
      env: { DATABASE_URL: cluster.database.url, PUBLIC_URL: publicUrl, LOG_LEVEL: 'warn' },
    });
    const dbDown = /ECONNREFUSED|ECONNRESET|terminat|shutting down|starting up|Connection|57P0/i.test(
      run.stderr,
    );
    if (run.code === 0 || !dbDown || Date.now() > deadline) return run;
    stats.cliRetries++;
    await sleep(500);
  }
}

// ---------- the jobs ----------
type SignalMode = 'early' | 'ontime' | 'late';
/** Finished tasks a fork may start from, by kind. */
const finished: Array<{
  kind: string;
  taskId: string;
  seed: number;
  /** A signal task's: the payload's n it was delivered (none: it timed out), and its URL. */
  payloadN?: number;
  url?: string;
  forked?: boolean;
}> = [];

async function stepsJob(i: number) {
  const seed = 1_000 + i;
  const args = { seed, steps: 6, stepMs: 300, sleepMs: 3_000 };
  const taskId = await create('steps', 'wf_steps', args);
  const t = await settled(taskId);
  if (
    record(
      'steps',
      taskId,
      t.status === 'completed' && t.result?.structuredContent?.sum === expectedSteps(seed, 6),
      () => JSON.stringify(t),
    )
  )
    finished.push({ kind: 'steps', taskId, seed });
}

async function signalJob(i: number, mode: SignalMode) {
  const seed = 2_000 + i;
  const args =
    mode === 'early'
      ? { seed, prepareMs: 2_500, timeoutMs: 120_000 }
      : mode === 'ontime'
        ? { seed, prepareMs: 0, timeoutMs: 120_000 }
        : { seed, prepareMs: 0, timeoutMs: 4_000 };
  const kind = `signal:${mode}`;
  const taskId = await create(kind, 'wf_signal', args);
  const n = seed * 2;
  let problem: string | undefined;
  let url: string | undefined;
  if (mode === 'late') {
    // The URL while it waits, then its end (timed out), then a delivery: refused.
    const waiting = await waitTask(
      taskId,
      (t) => signalUrl(t) !== undefined || TERMINAL.includes(t.status as string),
      'showing its signal URL',
      100,
    );
    url = signalUrl(waiting);
    const t = await settled(taskId);
    if (url === undefined) problem = 'the test never saw the URL while the task waited';
    else {
      const late = await deliver(url, { n });
      if (late.status !== 409) problem = `delivery after the timeout: HTTP ${late.status} ${late.text}`;
    }
    if (
      problem === undefined &&
      !(t.status === 'completed' && t.result?.content?.[0]?.text === expectedSignal(seed, undefined))
    )
      problem = JSON.stringify(t);
  } else {
    const ready =
      mode === 'early'
        ? (t: Task) => signalUrl(t) !== undefined
        : (t: Task) => /^Waiting for go/.test((t.statusMessage as string) ?? '');
    const seen = await waitTask(
      taskId,
      (t) => ready(t) || TERMINAL.includes(t.status as string),
      `ready for its ${mode} signal`,
      100,
    );
    url = signalUrl(seen);
    problem =
      url === undefined ? `ended before its signal: ${JSON.stringify(seen)}` : await deliverTwice(url, { n });
    const t = await settled(taskId);
    if (
      problem === undefined &&
      !(t.status === 'completed' && t.result?.content?.[0]?.text === expectedSignal(seed, n))
    )
      problem = JSON.stringify(t);
  }
  if (record(kind, taskId, problem === undefined, () => problem!))
    finished.push({ kind, taskId, seed, url, ...(mode === 'late' ? {} : { payloadN: n }) });
}

async function mapJob(i: number, failing: boolean) {
  const seed = 3_000 + i;
  const failForGood = Math.min(40, MAP_ITEMS - 1);
  const args = { seed, items: MAP_ITEMS, failEvery: 10, concurrency: 8, ...(failing && { failForGood }) };
  const kind = failing ? 'map:fails' : 'map';
  const taskId = await create(kind, 'wf_map', args);
  const t = await settled(taskId);
  // The map's policy runs an item 3 times; the item failing for good then fails the map, and the task.
  const ok = failing
    ? failedWith(
        t,
        `step "square[${failForGood}]" failed after 3 attempts: item ${failForGood} fails for good`,
      )
    : t.status === 'completed' && t.result?.structuredContent?.sum === expectedMap(seed, MAP_ITEMS);
  record(kind, taskId, ok, () => JSON.stringify(t).slice(0, 600));
}

async function stepRetryJob(i: number) {
  const seed = 4_000 + i;
  const exhausted = i % 5 === 4;
  const failures = exhausted ? 2 : 1 + (i % 3);
  const args = { seed, failures, maxAttempts: exhausted ? 2 : failures + 3 };
  const kind = exhausted ? 'step-retry:exhausted' : 'step-retry';
  const taskId = await create(kind, 'wf_step_retry', args);
  const t = await settled(taskId);
  const ok = exhausted
    ? failedWith(t, 'step "flaky" failed after 2 attempts: flaky run 2')
    : t.status === 'completed' && t.result?.structuredContent?.value === expectedStepRetry(seed);
  if (record(kind, taskId, ok, () => JSON.stringify(t)) && !exhausted) finished.push({ kind, taskId, seed });
}

async function toolRetryJob(i: number) {
  const seed = 5_000 + i;
  const taskId = await create('tool-retry', 'wf_tool_retry', { seed, crashes: 1 + (i % 2) });
  const t = await settled(taskId);
  if (
    record(
      'tool-retry',
      taskId,
      t.status === 'completed' && t.result?.structuredContent?.value === expectedToolRetry(seed),
      () => JSON.stringify(t),
    )
  )
    finished.push({ kind: 'tool-retry', taskId, seed });
}

async function nonRetryableJob(i: number) {
  const seed = 6_000 + i;
  const taskId = await create('non-retryable', 'wf_non_retryable', { seed });
  const t = await settled(taskId);
  record('non-retryable', taskId, failedWith(t, nonRetryableMessage(seed)), () => JSON.stringify(t));
}

/** A completed wf_artifact task's link: its size, SHA-256 and download through nginx by Range. */
async function checkArtifact(t: Task, seed: number, mebibytes: number): Promise<string | undefined> {
  if (t.status !== 'completed') return JSON.stringify(t).slice(0, 400);
  const link = t.result?.content?.[1] as Task | undefined;
  const sha = artifactSha256(seed, mebibytes);
  if (link?.uri !== `tasks://${t.taskId}/artifacts/${ARTIFACT_NAME}` || link.size !== mebibytes * MIB)
    return `link ${JSON.stringify(link)}`;
  if (link._meta?.['dev.durable-mcp-tasks/sha256'] !== sha)
    return `link sha256 ${link._meta?.['dev.durable-mcp-tasks/sha256']} ≠ ${sha}`;
  const url = link._meta?.['dev.durable-mcp-tasks/downloadUrl'] as string;
  if (!url.startsWith(`${publicUrl}/`)) return `download URL ${url} is not nginx's`;
  const got = await downloadByRanges(url, link.size as number);
  if (got.problem !== undefined) return got.problem;
  return got.sha === sha ? undefined : `downloaded sha256 ${got.sha} ≠ ${sha}`;
}

async function artifactJob(i: number) {
  const seed = 7_000 + i;
  const mebibytes = 8 + ((i * 3) % 9);
  const taskId = await create('artifact', 'wf_artifact', { seed, mebibytes });
  const problem = await checkArtifact(await settled(taskId), seed, mebibytes);
  if (record('artifact', taskId, problem === undefined, () => problem!))
    finished.push({ kind: 'artifact', taskId, seed });
}

async function pauseJob(i: number) {
  const seed = 8_000 + i;
  const taskId = await create('pause', 'wf_pause', { seed });
  const paused = await waitTask(
    taskId,
    (t) => /^Paused:/.test((t.statusMessage as string) ?? '') || TERMINAL.includes(t.status as string),
    'pausing',
  );
  let problem: string | undefined;
  if (paused.status !== 'working') problem = `not paused: ${JSON.stringify(paused)}`;
  else {
    writeFileSync(gateFile(logDir, seed), 'open');
    const run = await cli(['tasks', 'resume', taskId]);
    const again = run.code !== 0 && run.stdout.includes('not paused');
    if (!run.stdout.includes(`${taskId}: resumed`) && !again)
      problem = `tasks resume: exit ${run.code}: ${run.stdout}${run.stderr}`;
    const t = await settled(taskId);
    if (
      problem === undefined &&
      !(t.status === 'completed' && t.result?.structuredContent?.value === expectedPause(seed))
    )
      problem = JSON.stringify(t);
  }
  if (record('pause', taskId, problem === undefined, () => problem!))
    finished.push({ kind: 'pause', taskId, seed });
}

/** What a fork starts from: a finished task of `source`, and the step it runs again from. */
const FORKS: Array<{ source: string; fromStep: string }> = [
  { source: 'steps', fromStep: 's-3' },
  { source: 'signal:ontime', fromStep: 'prepare' },
  { source: 'signal:ontime', fromStep: 'after' },
  { source: 'signal:late', fromStep: 'after' },
  { source: 'signal:early', fromStep: 'prepare' },
  { source: 'step-retry', fromStep: 'flaky' },
  { source: 'artifact', fromStep: 'finish' },
  { source: 'pause', fromStep: 'gate' },
  { source: 'tool-retry', fromStep: 'second' },
  { source: 'signal:late', fromStep: 'prepare' },
];

/** The source's signal as the fork should find it at `fromStep` (the rule docs/operations.md states). */
async function signalStateAt(
  sourceId: string,
  fromStep: string,
): Promise<'delivered' | 'timed_out' | 'pending'> {
  const db = await cluster.database.connect();
  try {
    const { rows } = await db.query<{ state: 'delivered' | 'timed_out' | 'pending' }>(
      `select case when g.delivered_at < s.created_at then 'delivered'
                   when g.timeout_at < s.created_at then 'timed_out' else 'pending' end as state
         from task_signals g join task_steps s on s.task_id = g.task_id and s.name = $2
        where g.task_id = $1 and g.name = 'go'`,
      [sourceId, fromStep],
    );
    return rows[0]!.state;
  } finally {
    await db.end();
  }
}

async function forkJob(i: number) {
  const spec = FORKS[i % FORKS.length]!;
  const kind = `fork:${spec.source}@${spec.fromStep}`;
  const source = await waitFor(() => finished.find((f) => f.kind === spec.source && f.forked !== true), {
    timeoutMs: TASK_TIMEOUT_MS,
    intervalMs: 200,
    what: `a finished ${spec.source} task to fork`,
  });
  source.forked = true;
  const src = known.get(source.taskId)!;
  const isSignal = spec.source.startsWith('signal:');
  const state = isSignal ? await signalStateAt(source.taskId, spec.fromStep) : undefined;
  const run = await cli(['tasks', 'fork', source.taskId, '--from-step', spec.fromStep]);
  const head = new RegExp(`^(\\S+): forked from ${source.taskId} at step ${spec.fromStep}$`, 'm').exec(
    run.stdout,
  );
  if (run.code !== 0 || head === null) {
    record(kind, source.taskId, false, () => `tasks fork: exit ${run.code}: ${run.stdout}${run.stderr}`);
    return;
  }
  const taskId = head[1]!;
  client.acknowledged.add(taskId);
  known.set(taskId, { kind, tool: src.tool, args: src.args, forkOf: source.taskId });
  const urls = [...run.stdout.matchAll(/^ {2}signal go waits for a delivery to (\S+)/gm)].map((m) => m[1]!);
  let problem: string | undefined;
  // What the fork's wait gets: the source's payload when delivered before the fork step, a new one
  // delivered here to the URL the CLI printed when pending (a late source's is left to time out again).
  const deliverNew = state === 'pending' && spec.source !== 'signal:late';
  const payloadN = state === 'delivered' ? source.payloadN : deliverNew ? source.seed * 3 : undefined;
  if (isSignal && (state === 'pending') !== (urls.length === 1))
    problem = `the signal was ${state} at ${spec.fromStep}, yet the CLI printed ${urls.length} URLs: ${run.stdout}`;
  else if (urls.length === 1 && !urls[0]!.startsWith(`${publicUrl}/signals/`))
    problem = `URL ${urls[0]} is not nginx's`;
  else if (deliverNew) {
    // The new URL wakes the fork; the source's own no longer reaches anything.
    problem = await deliverTwice(urls[0]!, { n: payloadN });
    const old = await deliver(source.url!, { n: 1 });
    if (old.status === 409) stats.oldUrlRefused++;
    else problem ??= `the source's URL after the fork: HTTP ${old.status} ${old.text}`;
  }
  const t = await settled(taskId);
  if (problem === undefined) {
    const { seed } = source;
    const sc = t.result?.structuredContent as Task | undefined;
    const done = t.status === 'completed';
    const right =
      spec.source === 'steps'
        ? done && sc?.sum === expectedSteps(seed, src.args.steps as number)
        : isSignal
          ? done && t.result?.content?.[0]?.text === expectedSignal(seed, payloadN)
          : spec.source === 'step-retry'
            ? done && sc?.value === expectedStepRetry(seed)
            : spec.source === 'tool-retry'
              ? done && sc?.value === expectedToolRetry(seed)
              : spec.source === 'pause'
                ? done && sc?.value === expectedPause(seed)
                : undefined;
    if (spec.source === 'artifact') problem = await checkArtifact(t, seed, src.args.mebibytes as number);
    else if (right !== true) problem = JSON.stringify(t).slice(0, 400);
  }
  record(kind, taskId, problem === undefined, () => problem!);
}

// ---------- the mix: WORKFLOW_TASKS in all, forks among them ----------
const part = (share: number, min = 1) => Math.max(min, Math.round(TOTAL * share));
const perSignalMode = part(0.075);
const counts = {
  signal: perSignalMode * 3,
  stepRetry: part(0.12),
  toolRetry: part(0.1),
  nonRetryable: part(0.05),
  artifact: part(0.03),
  pause: part(0.03),
  map: part(0.01),
  mapFails: part(0.01),
  fork: part(0.05),
};
const steps = Math.max(1, TOTAL - Object.values(counts).reduce((a, b) => a + b, 0));
const jobs: Array<() => Promise<void>> = [
  ...Array.from({ length: steps }, (_, i) => () => stepsJob(i)),
  ...Array.from({ length: perSignalMode }, (_, i) => () => signalJob(i, 'early')),
  ...Array.from({ length: perSignalMode }, (_, i) => () => signalJob(perSignalMode + i, 'ontime')),
  ...Array.from({ length: perSignalMode }, (_, i) => () => signalJob(2 * perSignalMode + i, 'late')),
  ...Array.from({ length: counts.stepRetry }, (_, i) => () => stepRetryJob(i)),
  ...Array.from({ length: counts.toolRetry }, (_, i) => () => toolRetryJob(i)),
  ...Array.from({ length: counts.nonRetryable }, (_, i) => () => nonRetryableJob(i)),
  ...Array.from({ length: counts.artifact }, (_, i) => () => artifactJob(i)),
  ...Array.from({ length: counts.pause }, (_, i) => () => pauseJob(i)),
];
// A fixed shuffle (so kinds interleave the same way every run); the maps first (they take longest),
// the forks last (they need finished sources).
for (let i = jobs.length - 1, seed = 32; i > 0; i--) {
  seed = (seed * 1103515245 + 12345) % 2 ** 31;
  const j = seed % (i + 1);
  [jobs[i], jobs[j]] = [jobs[j]!, jobs[i]!];
}
jobs.unshift(
  ...Array.from({ length: counts.map }, (_, i) => () => mapJob(i, false)),
  ...Array.from({ length: counts.mapFails }, (_, i) => () => mapJob(counts.map + i, true)),
);
jobs.push(...Array.from({ length: counts.fork }, (_, i) => () => forkJob(i)));
const total = jobs.length;

// ---------- chaos ----------
const kills: Array<{ name: string; pid: number; at: number }> = [];
const events: Array<{ what: string; at: number; underLoad: boolean }> = [];
let driving = true;
const stopChaos = new AbortController();
const pause = (ms: number) =>
  sleep(ms, undefined, { signal: stopChaos.signal }).then(
    () => true,
    () => false,
  );
let chaosFailures = 0;
const chaosStep = (what: string, step: () => Promise<void>) =>
  step().catch((err: unknown) => {
    log(`CHAOS STEP FAILED (${what}): ${String(err)}`);
    chaosFailures++;
  });

// The pauses are the chaos's schedule, not waits for a condition.
const killer = (async () => {
  let n = 0;
  while (await pause(n === 0 ? 6_000 : KILL_EVERY_MS)) {
    n++;
    const worker = workers[Math.floor(Math.random() * workers.length)]!;
    if (!worker.alive) continue;
    const pid = worker.pid;
    const at = Date.now();
    await chaosStep(`SIGKILL ${worker.name}`, async () => {
      await worker.kill('SIGKILL');
      kills.push({ name: worker.name, pid, at });
      await worker.restart();
    });
    log(`SIGKILL ${worker.name} (pid ${pid}); started again as pid ${worker.pid}`);
  }
})();
/** Waits until `share` of the jobs have reported (false if the chaos was stopped first). */
const progressed = (share: number) =>
  waitFor(() => stopChaos.signal.aborted || outcomes.length >= share * total, {
    timeoutMs: TASK_TIMEOUT_MS * 2,
    intervalMs: 100,
    what: `${share * 100}% of the jobs reporting`,
  }).then(() => !stopChaos.signal.aborted);
// The outages land at points of the drive (a share of the jobs done), so they always hit it under load.
const outages = Promise.all([
  (async () => {
    if (!(await progressed(0.15))) return;
    await chaosStep('instance kill', async () => {
      log('SIGKILL http-2');
      events.push({ what: 'SIGKILL http-2', at: Date.now(), underLoad: driving });
      await http[1]!.kill('SIGKILL');
      await sleep(2_000);
      await http[1]!.restart();
      log('http-2 is back');
    });
  })(),
  (async () => {
    if (!(await progressed(0.45))) return;
    await chaosStep('Postgres restart', async () => {
      log(`Postgres restart -m ${PG_RESTART}`);
      const at = Date.now();
      events.push({ what: `Postgres restart -m ${PG_RESTART}`, at, underLoad: driving });
      await cluster.database.restart(PG_RESTART);
      log(`Postgres back after ${Date.now() - at} ms`);
    });
  })(),
]);

// ---------- the drive ----------
let exitCode = 1;
const started = Date.now();
try {
  log(
    `driving ${total} tasks (${steps} steps, ${counts.signal} signals, ${counts.map}+${counts.mapFails} maps of ${MAP_ITEMS}, ` +
      `${counts.stepRetry} step retries, ${counts.toolRetry} tool retries, ${counts.nonRetryable} non-retryable, ` +
      `${counts.artifact} artifacts, ${counts.pause} pauses, ${counts.fork} forks) through nginx, ${CONCURRENCY} at a time`,
  );
  let next = 0;
  const progress = setInterval(() => log(`  ${outcomes.length}/${total} jobs done`), 15_000);
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < jobs.length) {
        const job = jobs[next++]!;
        await job().catch((err: unknown) =>
          outcomes.push({ kind: 'client-error', ok: false, detail: String(err) }),
        );
      }
    }),
  );
  clearInterval(progress);
  driving = false;
  log(`drive done in ${((Date.now() - started) / 1000).toFixed(0)} s; stopping the chaos`);
  stopChaos.abort();
  await Promise.all([killer, outages]);
  exitCode = (await audit()) === 0 ? 0 : 1;
} finally {
  await cluster.stop();
  await nginx.stop();
  if (exitCode === 0) rmSync(logDir, { recursive: true, force: true });
  else log(`kept the bodies' logs in ${logDir}`);
}
process.exit(exitCode);

// ---------- the audit ----------
async function audit(): Promise<number> {
  let failures = chaosFailures;
  const fail = (what: string, items: readonly unknown[], show = 5) => {
    if (items.length === 0) return;
    failures += items.length;
    log(`FAIL ${what}: ${items.length}`);
    for (const item of items.slice(0, show))
      log(`    ${typeof item === 'string' ? item : JSON.stringify(item)}`);
  };

  // Results, by kind.
  const byKind = new Map<string, { ok: number; bad: number }>();
  for (const o of outcomes) {
    const k = byKind.get(o.kind) ?? { ok: 0, bad: 0 };
    if (o.ok) k.ok++;
    else k.bad++;
    byKind.set(o.kind, k);
  }
  for (const [kind, k] of [...byKind].sort()) log(`  ${kind.padEnd(28)} right: ${k.ok}  wrong: ${k.bad}`);
  const right = outcomes.filter((o) => o.ok).length;
  log(`exact results: ${right}/${total}`);
  fail(
    'wrong results',
    outcomes.filter((o) => !o.ok).map((o) => `${o.kind} ${o.taskId ?? ''}: ${o.detail.slice(0, 400)}`),
    10,
  );
  fail(
    'jobs that never reported',
    Array.from({ length: Math.max(0, total - outcomes.length) }, () => 'missing'),
  );
  log(
    `signals: second deliveries refused with 409: ${stats.secondDeliveries409}/${stats.secondDeliveries}; ` +
      `first deliveries answered other than 202 after a lost reply: ${stats.ambiguousFirstDeliveries}; source URLs refused after a fork: ${stats.oldUrlRefused}`,
  );
  log(
    `artifact Range pieces downloaded: ${stats.rangePieces}; CLI runs: ${stats.cliRuns} (${stats.cliRetries} again after a database error)`,
  );

  const db = await cluster.database.connect();
  try {
    // Nothing left active: every task ended, map items included (a map's items end with it).
    const activeSql = `select task_id, status, parent_task_id, map_name, map_index, status_message, paused_at,
                              leased_by, lease_expires_at from tasks where status not in ('completed', 'failed', 'cancelled')`;
    const stillActive = await waitFor(async () => (await db.query(activeSql)).rows.length === 0, {
      timeoutMs: 30_000,
      intervalMs: 250,
      what: 'every task ending',
    }).then(
      () => [],
      async () => (await db.query(activeSql)).rows,
    );
    fail('tasks stuck or orphaned (still active after every client saw its task end)', stillActive);

    const { rows: tasks } = await db.query<{
      task_id: string;
      status: string;
      tool_name: string;
      parent_task_id: string | null;
      map_name: string | null;
      map_index: number | null;
      updated_ms: number;
      key: string | null;
      failures: number;
    }>(`select task_id, status, tool_name, parent_task_id, map_name, map_index, idempotency_key as key, failures,
               (extract(epoch from last_updated_at) * 1000)::float8 as updated_ms from tasks`);
    const byId = new Map(tasks.map((t) => [t.task_id, t]));
    fail(
      'acknowledged tasks lost',
      [...client.acknowledged].filter((id) => !byId.has(id)),
    );
    fail(
      'tasks no client holds (a retried create made a second one)',
      tasks
        .filter((t) => t.key !== null && keyDigests.has(t.key) && !client.acknowledged.has(t.task_id))
        .map((t) => t.task_id),
    );
    const items = tasks.filter((t) => t.parent_task_id !== null);
    const itemOf = new Map(items.map((t) => [`${t.parent_task_id}/${t.map_name}/${t.map_index}`, t]));
    log(
      `tasks stored: ${tasks.length} (${items.length} map items); by status: ${JSON.stringify(countBy(tasks, (t) => t.status))}`,
    );

    // Terminal writes: exactly one per finished task, and never one over a terminal status.
    const { rows: writes } = await db.query<{ task_id: string; old_status: string; new_status: string }>(
      'select task_id, old_status, new_status from wf_terminal_writes',
    );
    const writesOf = countBy(writes, (w) => w.task_id);
    fail(
      'terminal writes over a terminal task',
      writes.filter((w) => TERMINAL.includes(w.old_status)),
    );
    fail(
      'finished tasks not written terminal exactly once',
      tasks
        .filter((t) => TERMINAL.includes(t.status) && writesOf[t.task_id] !== 1)
        .map((t) => `${t.task_id} ${t.status}: ${writesOf[t.task_id] ?? 0} writes`),
    );
    log(`terminal writes recorded: ${writes.length}`);

    // Attempts.
    const { rows: attempts } = await db.query<{
      task_id: string;
      attempt: number;
      worker_id: string;
      claimed_ms: number;
      ended_ms: number | null;
      outcome: string | null;
    }>(`select task_id, attempt, worker_id, (extract(epoch from claimed_at) * 1000)::float8 as claimed_ms,
               (extract(epoch from ended_at) * 1000)::float8 as ended_ms, outcome from task_attempts order by task_id, attempt`);
    const attemptsOf = new Map<string, typeof attempts>();
    for (const a of attempts) attemptsOf.set(a.task_id, [...(attemptsOf.get(a.task_id) ?? []), a]);
    const pidOf = (workerId: string) => Number(workerId.split(':')[1]);
    fail(
      'attempts of finished tasks without ended_at or outcome',
      attempts.filter(
        (a) =>
          TERMINAL.includes(byId.get(a.task_id)?.status ?? '') && (a.ended_ms === null || a.outcome === null),
      ),
    );
    const killedAttempts = attempts.flatMap((a) => {
      const kill = kills.find((k) => k.pid === pidOf(a.worker_id));
      return kill !== undefined && a.claimed_ms <= kill.at && (a.ended_ms === null || a.ended_ms >= kill.at)
        ? [{ a, kill }]
        : [];
    });
    // One exception: a map item cancelled with its failed map before its dead worker's lease lapsed
    // ends `cancelled` (nobody could know the worker was dead yet): counted, not a failure.
    const endedWithTask = ({ a, kill }: (typeof killedAttempts)[number]) =>
      a.outcome === 'cancelled' &&
      byId.get(a.task_id)?.status === 'cancelled' &&
      a.ended_ms !== null &&
      a.ended_ms <= kill.at + LEASE_MS;
    fail(
      `attempts of SIGKILLed workers not ended 'lease_lost' within LEASE_MS of the kill`,
      killedAttempts
        .filter(
          (k) =>
            !endedWithTask(k) &&
            (k.a.outcome !== 'lease_lost' ||
              k.a.ended_ms === null ||
              k.a.ended_ms > k.kill.at + LEASE_MS + 50),
        )
        .map(({ a, kill }) => ({
          task: a.task_id,
          attempt: a.attempt,
          outcome: a.outcome,
          endedAfterKillMs: a.ended_ms === null ? null : Math.round(a.ended_ms - kill.at),
          worker: kill.name,
        })),
      10,
    );
    const lapseAfterKill = killedAttempts
      .filter((k) => k.a.outcome === 'lease_lost')
      .map((k) => k.a.ended_ms! - k.kill.at)
      .sort((x, y) => x - y);
    const lostOrder = attempts.filter((a) => {
      const nextClaim = attemptsOf.get(a.task_id)!.find((b) => b.attempt > a.attempt)?.claimed_ms;
      return (
        a.outcome === 'lease_lost' &&
        a.ended_ms !== null &&
        (a.ended_ms < a.claimed_ms || (nextClaim !== undefined && a.ended_ms > nextClaim + 1))
      );
    });
    fail(`'lease_lost' attempts ended before their claim or after the next attempt's`, lostOrder);
    log(
      `attempts: ${attempts.length}; ended lease_lost: ${attempts.filter((a) => a.outcome === 'lease_lost').length}; ` +
        `open at one of the ${kills.length} SIGKILLs: ${killedAttempts.length} (lease_lost ${lapseAfterKill.length}, ` +
        `lapsed ${Math.round(lapseAfterKill[0] ?? 0)}–${Math.round(lapseAfterKill.at(-1) ?? 0)} ms after the kill; ` +
        `cancelled with their map before the lease lapsed ${killedAttempts.filter(endedWithTask).length}); outcomes: ${JSON.stringify(countBy(attempts, (a) => a.outcome ?? 'null'))}`,
    );

    // The bodies' starts against checkpoints, leases and retry policies.
    const starts = readStarts(logDir, readdirSync(logDir));
    const { rows: checkpoints } = await db.query<{ task_id: string; name: string; created_ms: number }>(
      `select task_id, name, (extract(epoch from created_at) * 1000)::float8 as created_ms from task_steps`,
    );
    const checkpointOf = new Map(checkpoints.map((c) => [`${c.task_id}/${c.name}`, c.created_ms]));
    const rowOf = (s: BodyStart) =>
      s.kind === 'item' ? itemOf.get(`${s.task}/${s.name}/${s.index}`) : byId.get(s.task);
    const afterCheckpoint = starts.flatMap((s) => {
      if (s.kind === 'item') {
        const item = rowOf(s);
        return item?.status === 'completed' && s.at > item.updated_ms
          ? [{ ...s, lateMs: s.at - item.updated_ms }]
          : [];
      }
      if (s.kind !== 'step' && s.kind !== 'artifact') return [];
      const at = checkpointOf.get(`${s.task}/${s.name}`);
      return at !== undefined && s.at > at ? [{ ...s, lateMs: Math.round(s.at - at) }] : [];
    });
    fail('bodies started after their checkpoint', afterCheckpoint, 10);
    const withoutLease = starts.flatMap((s) => {
      const row = rowOf(s);
      const own = (attemptsOf.get(row?.task_id ?? '') ?? []).filter(
        (a) => pidOf(a.worker_id) === s.pid && a.claimed_ms <= s.at + 1,
      );
      const a = own.at(-1);
      if (a === undefined) return [{ ...s, why: 'no attempt of its worker had claimed the task' }];
      const next = attemptsOf.get(a.task_id)!.find((b) => b.attempt > a.attempt);
      if (next !== undefined && next.claimed_ms < s.at)
        return [
          {
            ...s,
            why: `attempt ${next.attempt} had claimed it ${Math.round(s.at - next.claimed_ms)} ms before`,
          },
        ];
      if (a.ended_ms !== null && s.at > a.ended_ms + 1)
        return [
          {
            ...s,
            why: `its attempt ${a.attempt} had ended (${a.outcome}) ${Math.round(s.at - a.ended_ms)} ms before`,
          },
        ];
      return [];
    });
    fail('bodies started without their attempt holding the task', withoutLease, 10);

    const { rows: stepStarts } = await db.query<{ task_id: string; name: string; starts: number }>(
      'select task_id, name, starts from task_step_starts',
    );
    const { rows: resumes } = await db.query<{ task_id: string; at_ms: number }>(
      `select task_id, (extract(epoch from at) * 1000)::float8 as at_ms from task_actions where action = 'resume'`,
    );
    const policies = [...known].flatMap(([taskId, k]) =>
      k.tool === 'wf_step_retry'
        ? [{ taskId, name: 'flaky', max: k.args.maxAttempts as number }]
        : k.tool === 'wf_pause'
          ? [{ taskId, name: 'gate', max: GATE_ATTEMPTS }]
          : [],
    );
    const overStarted: unknown[] = [];
    for (const p of policies) {
      const counted = stepStarts.find((r) => r.task_id === p.taskId && r.name === p.name)?.starts ?? 0;
      const resumedAt = resumes
        .filter((r) => r.task_id === p.taskId)
        .map((r) => r.at_ms)
        .sort((a, b) => a - b);
      const epochs = [-Infinity, ...resumedAt].map(
        (from, i, all) =>
          starts.filter(
            (s) =>
              s.task === p.taskId && s.name === p.name && s.at >= from && s.at < (all[i + 1] ?? Infinity),
          ).length,
      );
      if (counted > p.max || epochs.some((n) => n > p.max) || epochs.at(-1)! > counted)
        overStarted.push({
          task: p.taskId,
          step: p.name,
          maxAttempts: p.max,
          task_step_starts: counted,
          bodyStartsPerResume: epochs,
        });
    }
    fail(
      'steps with a retry policy started more than maxAttempts (or more than task_step_starts counted)',
      overStarted,
    );
    log(
      `body starts logged: ${starts.length} (${JSON.stringify(countBy(starts, (s) => s.kind))}); ` +
        `steps with a policy checked: ${policies.length}; map items run more than once: ${
          Object.values(
            countBy(
              starts.filter((s) => s.kind === 'item'),
              (s) => `${s.task}/${s.index}`,
            ),
          ).filter((n) => n > 1).length
        }`,
    );

    // ctx.patched: every completed wf_steps task (forks too) recorded its marker, right before `bonus`.
    const markers = new Map(
      checkpoints.filter((c) => c.name === 'patch:bonus').map((c) => [c.task_id, c.created_ms]),
    );
    fail(
      'completed wf_steps tasks without the patch marker before their bonus step',
      tasks
        .filter((t) => t.tool_name === 'wf_steps' && t.status === 'completed')
        .filter((t) => !(markers.get(t.task_id)! <= checkpointOf.get(`${t.task_id}/bonus`)!))
        .map((t) => t.task_id),
    );

    // Items that fail once: each ran at least twice (the policy retried it), in every completed map.
    const retriedOnce = items.filter((t) => {
      const parent = known.get(t.parent_task_id!);
      return (
        parent !== undefined &&
        byId.get(t.parent_task_id!)?.status === 'completed' &&
        failsOnce(t.map_index!, parent.args.failEvery as number)
      );
    });
    fail(
      'map items that fail once but completed without a retry',
      retriedOnce
        .filter(
          (t) =>
            starts.filter((s) => s.kind === 'item' && s.task === t.parent_task_id && s.index === t.map_index)
              .length < 2,
        )
        .map((t) => t.task_id),
    );

    // Signals: how each was delivered, measured (the delivery against the first time the task reached its wait).
    const { rows: signals } = await db.query<{
      task_id: string;
      delivered_ms: number | null;
      timeout_ms: number | null;
    }>(
      `select task_id, (extract(epoch from delivered_at) * 1000)::float8 as delivered_ms,
              (extract(epoch from timeout_at) * 1000)::float8 as timeout_ms from task_signals`,
    );
    const classes = countBy(
      signals.filter((g) => known.get(g.task_id)?.forkOf === undefined),
      (g) => {
        if (g.delivered_ms === null) return 'timed out (no delivery)';
        const firstWait = Math.min(
          ...starts.filter((s) => s.kind === 'wait' && s.task === g.task_id).map((s) => s.at),
        );
        return g.delivered_ms < firstWait ? 'delivered before the wait' : 'delivered while waiting';
      },
    );
    log(
      `signals: ${JSON.stringify(classes)}; forks' signals: ${signals.filter((g) => known.get(g.task_id)?.forkOf !== undefined).length}`,
    );

    // Artifacts: every complete one has the SHA-256 of its seed's bytes.
    const { rows: artifacts } = await db.query<{ task_id: string; sha256: string; size: string }>(
      `select task_id, sha256, size from task_artifacts where state = 'complete' and name = $1`,
      [ARTIFACT_NAME],
    );
    fail(
      'artifacts whose stored SHA-256 is wrong',
      artifacts
        .filter((a) => {
          const k = known.get(a.task_id);
          return (
            k === undefined ||
            a.sha256 !== artifactSha256(k.args.seed as number, k.args.mebibytes as number) ||
            Number(a.size) !== (k.args.mebibytes as number) * MIB
          );
        })
        .map((a) => a.task_id),
    );
    log(`artifacts checked: ${artifacts.length}`);
    log(`tasks whose handler crashed and was retried: ${tasks.filter((t) => t.failures > 0).length}`);
  } finally {
    await db.end();
  }

  // The chaos happened, under load; no process exited by itself; all of them serve.
  log(
    `SIGKILLed workers: ${kills.length}; ${events.map((e) => `${e.what} (${e.underLoad ? 'under load' : 'NOT under load'})`).join('; ')}`,
  );
  fail(
    'outages that did not happen under load',
    events.filter((e) => !e.underLoad),
  );
  if (events.length < 2)
    fail('outages that never happened (the drive ended first)', [
      'instance kill and Postgres restart expected',
    ]);
  if (kills.length < 2) fail('too few worker kills', [`${kills.length}`]);
  log(`client-visible errors: ${client.errorsBetween(0, Date.now())}`);
  log(`requests per instance (nginx): ${JSON.stringify(Object.fromEntries(nginx.served()))}`);
  fail(
    'processes that exited by themselves',
    cluster.unexpectedExits.map((e) => `${e.name}: ${e.code ?? e.signal}`),
  );
  failures += await checkAllServing(cluster, client, log);
  log(`${right}/${total} exact; ${failures} failures; ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return failures;
}

function countBy<T>(items: readonly T[], key: (item: T) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return counts;
}
