/**
 * Workflow primitives benchmark: prints numbers, asserts nothing.
 *   DATABASE_URL=postgres://… node --import tsx bench/workflow.ts [sleepers] [signals]
 *
 * One process (HTTP + workers, as `npm start`), a real socket, a real Postgres.
 *   - wake-up lateness: `sleepers` tasks created at a steady rate, each sleeping 2 s (`ctx.sleep`): how late
 *     after its deadline each handler goes on. Floor: a plain 2 s setTimeout's lateness in the same process.
 *   - signal delivery: `POST /signals/{token}` sent → the waiting handler goes on (`ctx.waitForSignal`),
 *     one at a time. Floor: a synchronous `echo` tools/call round trip.
 */
import { z } from 'zod';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/log.ts';
import { startProcess } from '../src/process/start.ts';
import { defineTool, type ToolDefinition } from '../src/tools/define.ts';
import { SHIPPED_TOOLS } from '../src/tools/shipped/index.ts';
import { percentileLine, rpcClient } from './lib/sequential.ts';

const SLEEPERS = Number(process.argv[2] ?? 2_000);
const SIGNALS = Number(process.argv[3] ?? 100);
const SLEEP_MS = 2_000;

/** How late each sleeper went on after its deadline (ms), by id. */
const lateness = new Map<string, number>();
/** Each signal waiter's token once created, and when it went on after the delivery. */
const tokens = new Map<string, string>();
const resumed = new Map<string, number>();

const sleeper = defineTool({
  name: 'bench_sleeper',
  description: 'sleeps 2 s durably, then records how late it woke',
  inputSchema: z.object({ id: z.string() }),
  taskSupport: 'required',
  handler: async ({ id }, ctx) => {
    const deadline = await ctx.step('deadline', () => Date.now() + SLEEP_MS);
    await ctx.sleep('nap', new Date(deadline));
    lateness.set(id, Date.now() - deadline);
    return { content: [] };
  },
});
const waiter = defineTool({
  name: 'bench_signal',
  description: 'waits for its signal, then records when it went on',
  inputSchema: z.object({ id: z.string() }),
  taskSupport: 'required',
  handler: async ({ id }, ctx) => {
    const signal = await ctx.createSignal('go');
    tokens.set(id, signal.token);
    await ctx.waitForSignal(signal);
    resumed.set(id, performance.now());
    return { content: [] };
  },
});

const config = loadConfig({ ...process.env, PORT: '0', LOG_LEVEL: 'warn', RATE_LIMIT_POLLING: 'false' });
const rt = await startProcess({
  config,
  log: createLogger('warn'),
  role: 'all',
  tools: [...SHIPPED_TOOLS, sleeper, waiter] as ToolDefinition[],
});
const url = rt.url!;

const call = rpcClient(url);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const until = async (pred: () => boolean, timeoutMs = 60_000) => {
  const end = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > end) throw new Error('timed out');
    await pause(1);
  }
};

// 1. Sleepers at a steady 200 per second (the workers are otherwise idle); a 2 s setTimeout beside each.
const timerLateness: number[] = [];
const perTick = 10;
for (let i = 0; i < SLEEPERS; i += perTick) {
  const batch = Array.from({ length: Math.min(perTick, SLEEPERS - i) }, (_, k) => `s${i + k}`);
  await Promise.all(
    batch.map((id) => call('tools/call', { name: 'bench_sleeper', arguments: { id } }, 'bench_sleeper')),
  );
  const due = Date.now() + SLEEP_MS;
  setTimeout(() => timerLateness.push(Date.now() - due), SLEEP_MS);
  await pause(50);
}
await until(() => lateness.size === SLEEPERS, 120_000);

// 2. Signals, one at a time: the task parked in its wait, then the delivery.
for (let i = 0; i < 10; i++) await call('tools/call', { name: 'echo', arguments: { text: 'w' } }, 'echo');
const echo: number[] = [];
const delivery: number[] = [];
for (let i = 0; i < SIGNALS; i++) {
  let t = performance.now();
  await call('tools/call', { name: 'echo', arguments: { text: 'x' } }, 'echo');
  echo.push(performance.now() - t);
  const id = `g${i}`;
  const task = await call('tools/call', { name: 'bench_signal', arguments: { id } }, 'bench_signal');
  await until(() => tokens.has(id));
  for (;;) {
    const got = await call('tasks/get', { taskId: task.taskId }, task.taskId as string);
    if (got.statusMessage === 'Waiting for signal go') break;
    await pause(2);
  }
  t = performance.now();
  const res = await fetch(new URL(`/signals/${tokens.get(id)!}`, url), { method: 'POST', body: '{}' });
  if (res.status !== 202) throw new Error(`delivery: HTTP ${res.status}`);
  await until(() => resumed.has(id));
  delivery.push(resumed.get(id)! - t);
}

console.log(
  `sleepers: ${SLEEPERS} (200/s, ${SLEEP_MS} ms each); signals: ${SIGNALS} (sequential, one client)`,
);
console.log(percentileLine('wake-up lateness after the deadline', [...lateness.values()]));
console.log(percentileLine('floor: a 2 s setTimeout, same process', timerLateness));
console.log(percentileLine('signal POST sent → handler goes on', delivery));
console.log(percentileLine('floor: sync echo round trip', echo));
await rt.stop();
