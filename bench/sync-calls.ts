// The sync-calls scenario: does a CPU-bound synchronous tools/call stall the instance's other requests?
// Alice polls tasks/get one request at a time while Bob keeps 8 synchronous analyze_numbers calls in
// flight (one 10⁷-value step each, ~100 ms of CPU), against the same polling with Bob idle.
import { hashToken } from '../src/http/auth/static-tokens.ts';
import { postMcp } from '../test/helpers/mcp.ts';
import { DURATION, fmt, rows, type ScratchDb } from './lib/harness.ts';
import { mcpUrl, server } from './lib/processes.ts';
import { pct } from './lib/sequential.ts';

const TOKENS = { alice: 'alice-bench-token', bob: 'bob-bench-token' };
const SYNC_CALLS_IN_FLIGHT = 8;
const CPU_BOUND = { count: 10_000_000, chunkSize: 10_000_000 };

const as = (who: keyof typeof TOKENS) => ({ authorization: `Bearer ${TOKENS[who]}` });

/** Alice's tasks/get latencies (ms), one request at a time, until `until()` says stop. */
async function pollTask(url: string, taskId: string, until: () => boolean): Promise<number[]> {
  const latencies: number[] = [];
  while (!until()) {
    const t = performance.now();
    const reply = await postMcp(url, 'tasks/get', { taskId }, { headers: as('alice') });
    if (reply.body.result === undefined) throw new Error(`tasks/get: ${JSON.stringify(reply.body.error)}`);
    latencies.push(performance.now() - t);
  }
  return latencies;
}

/** Bob's synchronous calls (no tasks extension), `SYNC_CALLS_IN_FLIGHT` at a time until `until()`: how many ended. */
async function keepSyncCallsInFlight(url: string, until: () => boolean): Promise<number> {
  let done = 0;
  const lane = async () => {
    while (!until()) {
      const reply = await postMcp(
        url,
        'tools/call',
        { name: 'analyze_numbers', arguments: CPU_BOUND },
        { caps: {}, headers: as('bob') },
      );
      if (reply.body.result?.isError !== undefined || reply.body.error !== undefined)
        throw new Error(`analyze_numbers: ${JSON.stringify(reply.body)}`);
      done++;
    }
  };
  await Promise.all(Array.from({ length: SYNC_CALLS_IN_FLIGHT }, lane));
  return done;
}

const forSeconds = (s: number) => {
  const end = Date.now() + s * 1000;
  return () => Date.now() >= end;
};

const line = (xs: number[]) => `p50 ${pct(xs, 50).toFixed(1)} ms, p99 ${pct(xs, 99).toFixed(1)} ms`;

export async function benchSyncCalls(db: ScratchDb): Promise<void> {
  const srv = await server(db, {
    AUTH_MODE: 'bearer',
    AUTH_TOKENS: `alice=${hashToken(TOKENS.alice)},bob=${hashToken(TOKENS.bob)}`,
  });
  try {
    const url = mcpUrl(srv);
    // A task of Alice's (no worker runs: it stays working, which tasks/get reads the same way).
    const created = await postMcp(
      url,
      'tools/call',
      { name: 'analyze_numbers', arguments: { count: 1000 } },
      { headers: as('alice') },
    );
    const taskId = (created.body.result as { taskId?: string } | undefined)?.taskId;
    if (taskId === undefined) throw new Error(`no task: ${JSON.stringify(created.body)}`);
    // Warm-up: the JIT, the pools, and the synchronous path once.
    await keepSyncCallsInFlight(url, forSeconds(1));
    await pollTask(url, taskId, forSeconds(1));
    const idle = await pollTask(url, taskId, forSeconds(DURATION));
    const stop = forSeconds(DURATION);
    const [busy, calls] = await Promise.all([pollTask(url, taskId, stop), keepSyncCallsInFlight(url, stop)]);
    rows.push({
      scenario: `tasks/get while another principal runs ${SYNC_CALLS_IN_FLIGHT} CPU-bound synchronous calls`,
      ours: `${line(busy)} (${busy.length} gets; ${(calls / DURATION).toFixed(1)} sync calls/s)`,
      floor: `the same tasks/get, no calls: ${line(idle)}`,
      ratio: `${fmt.x(pct(busy, 50) / pct(idle, 50))} (p99 ${fmt.x(pct(busy, 99) / pct(idle, 99))})`,
      target: '≤ 3× (p50)',
    });
  } finally {
    await srv.stop();
  }
}
