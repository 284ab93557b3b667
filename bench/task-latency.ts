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
import { startProcess } from '../src/process/start.ts';
import { defineTool, type ToolDefinition } from '../src/tools/define.ts';
import { SHIPPED_TOOLS } from '../src/tools/shipped/index.ts';
import { percentileLine, rpcClient } from './lib/sequential.ts';

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
const rt = await startProcess({
  config,
  log: createLogger('warn'),
  role: 'all',
  tools: [...SHIPPED_TOOLS, noop, waiter] as ToolDefinition[],
});
const url = rt.url!;
const call = rpcClient(url);

const until = async (pred: () => boolean) => {
  while (!pred()) await new Promise((r) => setTimeout(r, 0));
};

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
console.log(percentileLine('baseline: sync echo round trip', echo));
console.log(percentileLine('tools/call → CreateTaskResult', create, echo));
console.log(percentileLine('tools/call sent → handler starts', start, echo));
console.log(percentileLine('tasks/cancel sent → abort signal', cancel, echo));
console.log(percentileLine('tools/call → completed (polled)', complete, echo));
await rt.stop();
