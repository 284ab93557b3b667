/**
 * Task latency benchmark: prints numbers, asserts nothing.
 *   DATABASE_URL=postgres://… node --import tsx bench/task-latency.ts [iterations]
 * Without DATABASE_URL it uses an embedded Postgres under .data/bench-postgres.
 *
 * One process (HTTP + workers, as `npm start`), a real socket, a real Postgres. Baseline, measured in the
 * same run: a synchronous `echo` tools/call round trip. Measured against it:
 *   - tools/call → CreateTaskResult (the row and its job committed),
 *   - tools/call sent → the task's handler starts on a worker (NOTIFY wake-up, fetch, claim),
 *   - tasks/cancel sent → the running handler's AbortSignal fires,
 *   - tools/call → completed, as seen by a client polling tasks/get every 2 ms.
 */
import { z } from 'zod';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/log.ts';
import { startRuntime } from '../src/runtime.ts';
import { defineTool, type ToolDefinition } from '../src/tools/define.ts';
import { SHIPPED_TOOLS } from '../src/tools/shipped/index.ts';
import { postMcp, TASKS_EXT } from '../test/helpers/mcp.ts';

const N = Number(process.argv[2] ?? 200);
const started = new Map<string, number>();
const aborted = new Map<string, number>();

const noop = defineTool({
  name: 'bench_noop',
  description: 'records when it starts',
  inputSchema: z.object({ id: z.string() }),
  taskSupport: 'required',
  handler: ({ id }) => {
    started.set(id, performance.now());
    return { content: [{ type: 'text', text: id }] };
  },
});
const waiter = defineTool({
  name: 'bench_wait',
  description: 'waits until aborted',
  inputSchema: z.object({ id: z.string() }),
  taskSupport: 'required',
  handler: async ({ id }, ctx) => {
    started.set(id, performance.now());
    await new Promise<void>((resolve) =>
      ctx.signal.addEventListener('abort', () => {
        aborted.set(id, performance.now());
        resolve();
      }),
    );
    throw ctx.signal.reason;
  },
});

const config = loadConfig({
  ...process.env,
  PORT: '0',
  LOG_LEVEL: 'warn',
  EMBEDDED_PG_DIR: process.env.EMBEDDED_PG_DIR ?? '.data/bench-postgres',
  EMBEDDED_PG_PORT: process.env.EMBEDDED_PG_PORT ?? '54349',
});
const rt = await startRuntime({
  config,
  log: createLogger('warn'),
  role: 'all',
  tools: [...SHIPPED_TOOLS, noop, waiter] as ToolDefinition[],
});
const url = rt.url!;
/** One 2026-07-28 request (the tasks extension declared); its result, or a throw with its error. */
async function call(
  method: string,
  params: Record<string, unknown>,
  name?: string,
): Promise<Record<string, any>> {
  const reply = await postMcp(url, method, params, {
    caps: { extensions: { [TASKS_EXT]: {} } },
    ...(name === undefined ? {} : { headers: { 'mcp-name': name } }),
  });
  if (reply.body.result === undefined) throw new Error(JSON.stringify(reply.body.error));
  return reply.body.result as Record<string, any>;
}

const until = async (pred: () => boolean) => {
  while (!pred()) await new Promise((r) => setTimeout(r, 0));
};
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const fmt = (label: string, xs: number[], base?: number[]) =>
  `${label.padEnd(38)} p50 ${pct(xs, 50).toFixed(2).padStart(7)} ms  p99 ${pct(xs, 99).toFixed(2).padStart(7)} ms` +
  (base ? `  (p50 ×${(pct(xs, 50) / pct(base, 50)).toFixed(1)} of baseline)` : '');

for (let i = 0; i < 20; i++) await call('tools/call', { name: 'echo', arguments: { text: 'w' } }, 'echo');

const echo: number[] = [];
const create: number[] = [];
const start: number[] = [];
const cancel: number[] = [];
const complete: number[] = [];
for (let i = 0; i < N; i++) {
  let t = performance.now();
  await call('tools/call', { name: 'echo', arguments: { text: 'x' } }, 'echo');
  echo.push(performance.now() - t);

  const id = `n${i}`;
  t = performance.now();
  const task = await call('tools/call', { name: 'bench_noop', arguments: { id } }, 'bench_noop');
  create.push(performance.now() - t);
  await until(() => started.has(id));
  start.push(started.get(id)! - t);
  for (;;) {
    const got = await call('tasks/get', { taskId: task.taskId }, task.taskId as string);
    if (got.status === 'completed') break;
    await new Promise((r) => setTimeout(r, 2));
  }
  complete.push(performance.now() - t);

  const wid = `w${i}`;
  const running = await call('tools/call', { name: 'bench_wait', arguments: { id: wid } }, 'bench_wait');
  await until(() => started.has(wid));
  t = performance.now();
  await call('tasks/cancel', { taskId: running.taskId }, running.taskId as string);
  await until(() => aborted.has(wid));
  cancel.push(aborted.get(wid)! - t);
}

console.log(`iterations: ${N} (sequential, one client)`);
console.log(fmt('baseline: sync echo round trip', echo));
console.log(fmt('tools/call → CreateTaskResult', create, echo));
console.log(fmt('tools/call sent → handler starts', start, echo));
console.log(fmt('tasks/cancel sent → abort signal', cancel, echo));
console.log(fmt('tools/call → completed (polled)', complete, echo));
await rt.stop();
