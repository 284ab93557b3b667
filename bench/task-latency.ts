/**
 * Task latency benchmark: prints numbers, asserts nothing.
 *   DATABASE_URL=postgres://… node --import tsx bench/task-latency.ts [iterations]
 * Without DATABASE_URL it uses an embedded Postgres under .data/bench-postgres.
 *
 * Baseline (same run, same process): a synchronous `echo` tools/call round trip. Measured: the
 * tools/call that creates a task (durable commit of row + job), and create → completed as seen by a
 * client polling tasks/get every 2 ms (no-op task: analyze_numbers count=1).
 */
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/log.ts';
import { startRuntime } from '../src/runtime.ts';
import { SHIPPED_TOOLS } from '../src/tools/shipped/index.ts';

const N = Number(process.argv[2] ?? 200);
const config = loadConfig({
  ...process.env,
  PORT: '0',
  LOG_LEVEL: 'warn',
  EMBEDDED_PG_DIR: process.env.EMBEDDED_PG_DIR ?? '.data/bench-postgres',
  EMBEDDED_PG_PORT: process.env.EMBEDDED_PG_PORT ?? '54349',
});
const rt = await startRuntime({ config, log: createLogger('warn'), role: 'all', tools: SHIPPED_TOOLS });
const url = rt.url!;
let id = 0;

async function call(
  method: string,
  params: Record<string, unknown>,
  name?: string,
): Promise<Record<string, any>> {
  const body = {
    jsonrpc: '2.0',
    id: ++id,
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
      },
    },
  };
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': method,
      ...(name === undefined ? {} : { 'mcp-name': name }),
    },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as { result?: Record<string, any>; error?: unknown };
  if (json.result === undefined) throw new Error(JSON.stringify(json.error));
  return json.result;
}

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const fmt = (label: string, xs: number[], base?: number[]) =>
  `${label.padEnd(34)} p50 ${pct(xs, 50).toFixed(2).padStart(7)} ms  p99 ${pct(xs, 99).toFixed(2).padStart(7)} ms` +
  (base ? `  (p50 ×${(pct(xs, 50) / pct(base, 50)).toFixed(1)} of baseline)` : '');

// Warm up.
for (let i = 0; i < 20; i++) await call('tools/call', { name: 'echo', arguments: { text: 'w' } }, 'echo');

const echo: number[] = [];
const create: number[] = [];
const complete: number[] = [];
for (let i = 0; i < N; i++) {
  let t = performance.now();
  await call('tools/call', { name: 'echo', arguments: { text: 'x' } }, 'echo');
  echo.push(performance.now() - t);

  t = performance.now();
  const task = await call(
    'tools/call',
    { name: 'analyze_numbers', arguments: { count: 1 } },
    'analyze_numbers',
  );
  create.push(performance.now() - t);
  for (;;) {
    const got = await call('tasks/get', { taskId: task.taskId }, task.taskId as string);
    if (got.status === 'completed') break;
    await new Promise((r) => setTimeout(r, 2));
  }
  complete.push(performance.now() - t);
}

console.log(`iterations: ${N}`);
console.log(fmt('baseline: sync echo round trip', echo));
console.log(fmt('tools/call → CreateTaskResult', create, echo));
console.log(fmt('tools/call → completed (polled)', complete, echo));
await rt.stop();
