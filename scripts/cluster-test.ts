/**
 * The cluster test (`npm run test:cluster`, run by .ci/run): real nginx round-robin in front of two HTTP
 * instances, two worker processes, one Postgres; a few hundred tasks of the shipped tools driven through
 * nginx by independent clients (ext-tasks' withTasks, and raw HTTP), including input answered through a
 * different instance than the one that created the task, and cancels; meanwhile one worker is SIGKILLed
 * and one HTTP instance is restarted. Every acknowledged task must end in the right state with the right
 * result; none lost, none run to completion twice. Prints numbers; exits non-zero on any mismatch.
 *
 *   ADMIN_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node --import tsx scripts/cluster-test.ts
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import {
  createApplicationInputHandler,
  DispatchError,
  resultFromTaskOutcome,
  withTasks,
  type ConnectedMcpSessionPort,
  type DispatchOptions,
  type JsonRpcResponse,
} from '@modelcontextprotocol/ext-tasks/client';
import type { JsonValue } from '@modelcontextprotocol/ext-tasks/core';
import pg from 'pg';
import { expectedAnalysis } from '../test/helpers/analysis.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const ADMIN =
  process.env.ADMIN_DATABASE_URL ??
  process.env.TEST_DATABASE_URL ??
  'postgres://postgres@127.0.0.1:5432/postgres';
const PV = '2026-07-28';
const EXT = 'io.modelcontextprotocol/tasks';
const COUNTS = { analyze: 150, confirm: 60, cancel: 40, fail: 20 };
const t0 = Date.now();
const log = (msg: string) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${msg}`);

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

// ---------- infrastructure ----------
const dbName = `cluster_${randomBytes(4).toString('hex')}`;
const admin = new pg.Client({ connectionString: ADMIN });
await admin.connect();
await admin.query(`create database ${dbName}`);
const dbUrl = (() => {
  const u = new URL(ADMIN);
  u.pathname = `/${dbName}`;
  return u.toString();
})();

const children = new Set<ChildProcess>();
const COMMON_ENV = {
  DATABASE_URL: dbUrl,
  LOG_LEVEL: 'warn',
  TASK_POLL_INTERVAL_MS: '50',
  LEASE_MS: '2000',
  SWEEP_INTERVAL_MS: '500',
  WORKER_CONCURRENCY: '16',
  SHUTDOWN_GRACE_MS: '3000',
};
function proc(
  name: string,
  args: string[],
  env: Record<string, string>,
): { child: ChildProcess; exited: Promise<void> } {
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
    cwd: ROOT,
    env: { ...process.env, ...COMMON_ENV, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr.on('data', (d: Buffer) => {
    for (const line of d.toString().split('\n'))
      if (line.includes('"level":"error"')) console.log(`  ${name}: ${line}`);
  });
  children.add(child);
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => (children.delete(child), resolve())),
  );
  return { child, exited };
}
async function waitHttp(port: number): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      await fetch(`http://127.0.0.1:${port}/mcp`, { method: 'GET' });
      return;
    } catch {
      await sleep(100);
    }
  }
  throw new Error(`port ${port} never answered`);
}

const httpPorts = [await freePort(), await freePort()];
const startHttp = (i: number) =>
  proc(`http-${i + 1}`, ['src/main.ts', '--role=server'], { PORT: String(httpPorts[i]) });
const http = [startHttp(0)];
await waitHttp(httpPorts[0]!); // the first instance migrates; then the rest start
http.push(startHttp(1));
const workers = [proc('worker-1', ['workers/main.ts'], {}), proc('worker-2', ['workers/main.ts'], {})];
await waitHttp(httpPorts[1]!);

const nginxPort = await freePort();
const nginxDir = mkdtempSync(path.join(tmpdir(), 'mcp-nginx-'));
writeFileSync(
  path.join(nginxDir, 'nginx.conf'),
  `daemon off;
pid ${nginxDir}/nginx.pid;
error_log ${nginxDir}/error.log warn;
worker_processes 1;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${nginxDir}/body;
  proxy_temp_path ${nginxDir}/proxy;
  upstream mcp {
    server 127.0.0.1:${httpPorts[0]} max_fails=1 fail_timeout=1s;
    server 127.0.0.1:${httpPorts[1]} max_fails=1 fail_timeout=1s;
    keepalive 16;
  }
  server {
    listen 127.0.0.1:${nginxPort};
    location /mcp {
      proxy_pass http://mcp;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      # Keep the client's Host: the instances check it (DNS-rebinding protection).
      proxy_set_header Host $host;
      proxy_buffering off;
      proxy_read_timeout 60s;
      proxy_next_upstream error timeout;
      add_header X-Upstream $upstream_addr always;
    }
  }
}
`,
);
const nginx = spawn('nginx', ['-c', path.join(nginxDir, 'nginx.conf'), '-p', nginxDir], { stdio: 'inherit' });
await waitHttp(nginxPort);
const URL_ = `http://127.0.0.1:${nginxPort}/mcp`;
log(`nginx :${nginxPort} → http :${httpPorts.join(', :')}; 2 workers; database ${dbName}`);

// ---------- clients ----------
interface Reply {
  status: number;
  upstream: string;
  body: Record<string, any>;
}
let rpcId = 0;
/** One JSON-RPC request through nginx; transient failures (connection resets, 502) are retried for reads. */
async function rpc(
  method: string,
  params: Record<string, unknown>,
  retryable = method !== 'tools/call',
  url = URL_,
): Promise<Reply> {
  const name =
    method === 'tools/call' ? params.name : method.startsWith('tasks/') ? params.taskId : undefined;
  for (let attempt = 0; ; attempt++) {
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': PV,
          'mcp-method': method,
          ...(typeof name === 'string' ? { 'mcp-name': name } : {}),
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: ++rpcId,
          method,
          params: {
            ...params,
            _meta: {
              'io.modelcontextprotocol/protocolVersion': PV,
              'io.modelcontextprotocol/clientCapabilities': {
                extensions: { [EXT]: {} },
                elicitation: { form: {} },
              },
            },
          },
        }),
      });
      const text = await res.text();
      if (res.status >= 500 && retryable && attempt < 20) {
        await sleep(100);
        continue;
      }
      return {
        status: res.status,
        upstream: res.headers.get('x-upstream') ?? '',
        body: JSON.parse(text) as Record<string, any>,
      };
    } catch (err) {
      if (!retryable || attempt >= 20) throw err;
      await sleep(100);
    }
  }
}

/** ext-tasks' port over fetch through nginx (retryable transport failures are re-sent by ext-tasks, then here). */
function port(): ConnectedMcpSessionPort {
  return {
    endpointId: URL_,
    taskCapabilities: { generation: 'v2', capabilities: {} },
    async dispatch(request: JsonValue, _opts?: DispatchOptions): Promise<JsonRpcResponse> {
      const { method, params } = request as { method: string; params?: Record<string, unknown> };
      let reply: Reply;
      try {
        reply = await rpc(method, { ...(params ?? {}) }, method !== 'tools/call');
      } catch (cause) {
        throw new DispatchError(`transport failure for ${method}`, method !== 'tools/call', { cause });
      }
      const m = reply.body;
      if (m.error !== undefined)
        return { kind: 'error', error: m.error as { code: number; message: string } };
      return { kind: 'result', result: m.result as JsonValue };
    },
    onServerRequest: () => () => {},
    onNotification: () => () => {},
    onInvalidated: () => () => {},
    invalidated: false,
  };
}

// ---------- workload ----------
type Outcome = { kind: string; taskId?: string; ok: boolean; detail: string };
const outcomes: Outcome[] = [];
const acknowledged = new Set<string>();
let crossInstanceUpdates = 0;

const session = withTasks(port(), {
  onInputRequest: createApplicationInputHandler({
    elicitation: async () => ({ action: 'cancel' }),
    sampling: async () => {
      throw new Error('unsupported');
    },
    roots: async () => ({ roots: [] }),
  }),
});

async function analyzeJob(i: number): Promise<void> {
  const count = 20_000 + ((i * 7919) % 80_000);
  const args = { count, chunkSize: 5000, delayMsPerChunk: 100 };
  const ex = await session.callTool('analyze_numbers', args);
  if (ex.kind === 'task') acknowledged.add(ex.handle.taskId);
  const { outcome } = await ex.settle();
  const result = resultFromTaskOutcome(outcome) as { structuredContent?: unknown };
  const expected = expectedAnalysis(count, 5000);
  const ok = isDeepStrictEqual(result.structuredContent, expected);
  outcomes.push({
    kind: 'analyze',
    taskId: ex.kind === 'task' ? ex.handle.taskId : undefined,
    ok,
    detail: ok ? '' : JSON.stringify(result),
  });
}

async function poll(taskId: string, until: (t: Record<string, any>) => boolean, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await rpc('tasks/get', { taskId });
    const task = r.body.result as Record<string, any> | undefined;
    if (task !== undefined && until(task)) return task;
    if (Date.now() > deadline) throw new Error(`task ${taskId} stuck: ${JSON.stringify(r.body)}`);
    await sleep(50);
  }
}

async function confirmJob(i: number): Promise<void> {
  const accept = i % 2 === 0;
  const created = await rpc('tools/call', { name: 'confirm_action', arguments: { action: `op-${i}` } });
  const taskId = created.body.result.taskId as string;
  acknowledged.add(taskId);
  await poll(taskId, (t) => t.status === 'input_required');
  // Answer through the other instance than the one that created the task (nginx said which one did).
  const response = accept ? { action: 'accept', content: { confirm: true } } : { action: 'decline' };
  const other = httpPorts.find((p) => !created.upstream.endsWith(`:${p}`));
  const ack = await rpc(
    'tasks/update',
    { taskId, inputResponses: { confirm: response } },
    true,
    `http://127.0.0.1:${other}/mcp`,
  );
  if (ack.body.result?.resultType === 'complete' && created.upstream !== '') crossInstanceUpdates++;
  const done = await poll(taskId, (t) => ['completed', 'failed', 'cancelled'].includes(t.status as string));
  const want = `${accept ? 'confirmed' : 'declined'}: op-${i}`;
  const ok = done.status === 'completed' && done.result?.content?.[0]?.text === want;
  outcomes.push({ kind: 'confirm', taskId, ok, detail: ok ? '' : JSON.stringify(done) });
}

async function cancelJob(): Promise<void> {
  const created = await rpc('tools/call', {
    name: 'analyze_numbers',
    arguments: { count: 100_000, chunkSize: 5000, delayMsPerChunk: 250 },
  });
  const taskId = created.body.result.taskId as string;
  acknowledged.add(taskId);
  await poll(taskId, (t) => typeof t.statusMessage === 'string' || t.status !== 'working');
  await rpc('tasks/cancel', { taskId });
  const done = await poll(taskId, (t) => ['completed', 'failed', 'cancelled'].includes(t.status as string));
  outcomes.push({
    kind: 'cancel',
    taskId,
    ok: done.status === 'cancelled',
    detail: JSON.stringify(done.status),
  });
}

async function failJob(i: number): Promise<void> {
  const kind = i % 2 === 0 ? 'tool' : 'protocol';
  const created = await rpc('tools/call', { name: 'fail_with', arguments: { kind } });
  const taskId = created.body.result.taskId as string;
  acknowledged.add(taskId);
  const done = await poll(taskId, (t) => ['completed', 'failed', 'cancelled'].includes(t.status as string));
  const ok =
    kind === 'tool'
      ? done.status === 'completed' && done.result?.isError === true
      : done.status === 'failed' && done.error?.code === -32603;
  outcomes.push({ kind: `fail:${kind}`, taskId, ok, detail: ok ? '' : JSON.stringify(done) });
}

const jobs: Array<() => Promise<void>> = [
  ...Array.from({ length: COUNTS.analyze }, (_, i) => () => analyzeJob(i)),
  ...Array.from({ length: COUNTS.confirm }, (_, i) => () => confirmJob(i)),
  ...Array.from({ length: COUNTS.cancel }, () => () => cancelJob()),
  ...Array.from({ length: COUNTS.fail }, (_, i) => () => failJob(i)),
];
// A fixed shuffle (Fisher-Yates with a small LCG), so that kinds interleave the same way every run.
for (let i = jobs.length - 1, seed = 42; i > 0; i--) {
  seed = (seed * 1103515245 + 12345) % 2 ** 31;
  const j = seed % (i + 1);
  [jobs[i], jobs[j]] = [jobs[j]!, jobs[i]!];
}

async function pool(limit: number): Promise<void> {
  let next = 0;
  const errors: string[] = [];
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < jobs.length) {
        const job = jobs[next++]!;
        await job().catch((err: unknown) => {
          errors.push(String(err));
          outcomes.push({ kind: 'client-error', ok: false, detail: String(err) });
        });
      }
    }),
  );
  if (errors.length > 0) log(`client errors: ${errors.length}: ${errors.slice(0, 3).join(' | ')}`);
}

// ---------- chaos ----------
const chaos = (async () => {
  await sleep(1_500);
  log('SIGKILL worker-1');
  workers[0]!.child.kill('SIGKILL');
  await sleep(2_500);
  log('restarting http-1 (SIGTERM, then start again)');
  http[0]!.child.kill('SIGTERM');
  await http[0]!.exited;
  http[0] = startHttp(0);
  await waitHttp(httpPorts[0]!);
  log('http-1 is back; starting a replacement worker');
  workers[0] = proc('worker-3', ['workers/main.ts'], {});
})();

let exitCode = 1;
try {
  log(`driving ${jobs.length} tasks through nginx, 40 at a time`);
  await pool(40);
  await chaos;
  // ---------- checks ----------
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  const rows = (
    await db.query<{
      task_id: string;
      status: string;
      tool_name: string;
      steps: string;
      resumed: boolean;
      args: { count?: number; chunkSize?: number };
    }>(
      `select t.task_id, t.status, t.tool_name, t.arguments as args,
              (select count(*) from task_steps s where s.task_id = t.task_id) as steps,
              (select count(distinct attempt) > 1 from task_steps s where s.task_id = t.task_id) as resumed
         from tasks t`,
    )
  ).rows;
  await db.end();
  const stored = new Map(rows.map((r) => [r.task_id, r]));
  const lost = [...acknowledged].filter((id) => !stored.has(id));
  const wrongSteps = rows.filter(
    (r) =>
      r.tool_name === 'analyze_numbers' &&
      r.status === 'completed' &&
      Number(r.steps) !== Math.ceil((r.args.count ?? 0) / (r.args.chunkSize ?? 100_000)),
  );
  const bad = outcomes.filter((o) => !o.ok);
  const byKind = new Map<string, { ok: number; bad: number }>();
  for (const o of outcomes) {
    const k = byKind.get(o.kind) ?? { ok: 0, bad: 0 };
    if (o.ok) k.ok++;
    else k.bad++;
    byKind.set(o.kind, k);
  }
  log(`acknowledged tasks: ${acknowledged.size}; stored: ${rows.length}; lost: ${lost.length}`);
  for (const [kind, k] of byKind) log(`  ${kind.padEnd(14)} right: ${k.ok}  wrong: ${k.bad}`);
  log(`input answered through the other instance: ${crossInstanceUpdates}/${COUNTS.confirm}`);
  log(`completed analyze tasks with a step count other than their chunks: ${wrongSteps.length}`);
  log(
    `tasks whose checkpoints span several attempts (taken over after the SIGKILL): ${rows.filter((r) => r.resumed).length}`,
  );
  for (const o of bad.slice(0, 10)) log(`  WRONG ${o.kind} ${o.taskId ?? ''}: ${o.detail.slice(0, 300)}`);
  const failures =
    bad.length + lost.length + wrongSteps.length + (crossInstanceUpdates < COUNTS.confirm ? 1 : 0);
  console.log(`${outcomes.length - bad.length} passed, ${failures} failed`);
  exitCode = failures === 0 && outcomes.length === jobs.length ? 0 : 1;
} finally {
  await session.close().catch(() => {});
  for (const c of children) c.kill('SIGTERM');
  await Promise.all([...children].map((c) => new Promise((r) => c.once('exit', r))));
  nginx.kill('SIGQUIT');
  await new Promise((r) => nginx.once('exit', r));
  rmSync(nginxDir, { recursive: true, force: true });
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.end();
}
process.exit(exitCode);
