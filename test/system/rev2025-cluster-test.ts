/**
 * The session-era cluster test (`npm run test:rev2025-cluster`, run by .ci/run): the client most MCP
 * hosts run today, @modelcontextprotocol/sdk 1.x (2025-11-25, `Mcp-Session-Id`), against real nginx
 * round-robin (no stickiness) in front of two HTTP instances, with two separate worker processes and a
 * private Postgres. Every request of the session may land on either instance: the GET stream, the
 * answers to elicitation requests, tasks/result. One worker is SIGKILLed while it runs a task, which
 * still completes on the other. Prints each check; exits non-zero on any failure.
 *
 *   node --import tsx test/system/rev2025-cluster-test.ts
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { expectedAnalysis } from '../helpers/analysis.ts';
import { waitFor } from '../helpers/wait.ts';
import { startCluster, timedLog } from '../helpers/system/cluster.ts';

const log = timedLog();

const cluster = await startCluster({
  name: 'rev2025-cluster',
  pooler: 'none',
  env: {
    LOG_LEVEL: 'warn',
    LEASE_MS: '2000',
    SWEEP_INTERVAL_MS: '300',
    TASK_POLL_INTERVAL_MS: '100',
    SHUTDOWN_GRACE_MS: '2000',
  },
});
const { http, workers } = cluster;
const url = cluster.url.replace('127.0.0.1', 'localhost');
log(
  `nginx ${url} → http :${cluster.ports.join(', :')} (round-robin); 2 workers; @modelcontextprotocol/sdk 1.x`,
);

let passed = 0;
let failed = 0;
async function check(name: string, fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
    passed++;
    log(`ok    ${name}`);
  } catch (err) {
    failed++;
    log(`FAIL  ${name}: ${err instanceof Error ? err.message : String(err)}`);
  }
}
function expectEqual(actual: unknown, expected: unknown, what: string): void {
  if (!isDeepStrictEqual(actual, expected)) {
    throw new Error(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
}

/** Runs a tool as a task to its end; returns the messages callToolStream yielded. */
async function runAsTask(client: Client, name: string, args: Record<string, unknown>) {
  const seen: Array<Record<string, any>> = [];
  for await (const m of client.experimental.tasks.callToolStream(
    { name, arguments: args },
    CallToolResultSchema,
    { task: { ttl: 600_000 } },
  )) {
    seen.push(m as Record<string, any>);
  }
  return seen;
}

let elicitations = 0;
const client = new Client({ name: 'sdk1-cluster', version: '1.0.0' }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, async () => {
  elicitations++;
  return { action: 'accept', content: { confirm: true } };
});
const admin = await cluster.database.connect();
try {
  await check('connect (initialize through nginx, session in Postgres)', () =>
    client.connect(new StreamableHTTPClientTransport(new URL(url))),
  );
  await check('listTools: every shipped tool with its execution.taskSupport', async () => {
    const { tools } = await client.listTools();
    expectEqual(
      Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport])),
      {
        analyze_numbers: 'optional',
        confirm_action: 'required',
        fail_with: 'required',
        echo: 'forbidden',
        approved_export: 'required',
        checksum_shards: 'required',
        export_csv: 'required',
        scan_rows: 'required',
      },
      'taskSupport',
    );
  });
  await check('callTool echo', async () => {
    const r = await client.callTool({ name: 'echo', arguments: { text: 'through nginx' } });
    expectEqual(r.content, [{ type: 'text', text: 'through nginx' }], 'echo');
  });
  await check('callTool analyze_numbers (synchronous)', async () => {
    const r = await client.callTool({ name: 'analyze_numbers', arguments: { count: 5000, chunkSize: 1000 } });
    expectEqual(r.structuredContent, expectedAnalysis(5000, 1000), 'analysis');
  });
  await check('callToolStream analyze_numbers as a task', async () => {
    const seen = await runAsTask(client, 'analyze_numbers', {
      count: 30_000,
      chunkSize: 5000,
      delayMsPerChunk: 50,
    });
    expectEqual(
      seen.find((m) => m.type === 'result')?.result?.structuredContent,
      expectedAnalysis(30_000, 5000),
      'analysis',
    );
  });
  await check('callToolStream confirm_action: the elicitation is answered by the client', async () => {
    const before = elicitations;
    const seen = await runAsTask(client, 'confirm_action', { action: 'ship it' });
    expectEqual(
      seen.find((m) => m.type === 'result')?.result?.content?.[0]?.text,
      'confirmed: ship it',
      'result',
    );
    expectEqual(elicitations, before + 1, 'elicitations answered');
  });
  await check('callToolStream fail_with: a tool error ends the task failed', async () => {
    const seen = await runAsTask(client, 'fail_with', { kind: 'tool' });
    expectEqual(seen.at(-1)?.type, 'error', 'last message');
  });
  let longTask = '';
  await check('getTask, listTasks, cancelTask', async () => {
    for await (const m of client.experimental.tasks.callToolStream(
      { name: 'analyze_numbers', arguments: { count: 1_000_000, chunkSize: 10_000, delayMsPerChunk: 200 } },
      CallToolResultSchema,
      { task: { ttl: 600_000 } },
    )) {
      if (m.type === 'taskCreated') {
        longTask = m.task.taskId;
        break;
      }
    }
    expectEqual((await client.experimental.tasks.getTask(longTask)).status, 'working', 'status');
    const listed = await client.experimental.tasks.listTasks();
    if (!listed.tasks.some((t) => t.taskId === longTask)) throw new Error('the task is not listed');
    expectEqual((await client.experimental.tasks.cancelTask(longTask)).status, 'cancelled', 'cancelled');
  });
  await check('a worker SIGKILLed mid-task: the task completes on the other worker', async () => {
    let taskId = '';
    const done = (async () => {
      const seen: Array<Record<string, any>> = [];
      for await (const m of client.experimental.tasks.callToolStream(
        { name: 'analyze_numbers', arguments: { count: 40_000, chunkSize: 2000, delayMsPerChunk: 150 } },
        CallToolResultSchema,
        { task: { ttl: 600_000 } },
      )) {
        if (m.type === 'taskCreated') taskId = m.task.taskId;
        seen.push(m as Record<string, any>);
      }
      return seen;
    })();
    const holder = await waitFor(
      async () => {
        if (taskId === '') return undefined;
        const { rows } = await admin.query<{ pid: string }>(
          `select split_part(leased_by, ':', 2) as pid from tasks where task_id = $1 and leased_by is not null`,
          [taskId],
        );
        return rows[0]?.pid;
      },
      { timeoutMs: 20_000, intervalMs: 100, what: 'a worker leasing the task' },
    );
    const victim = workers.find((w) => String(w.pid) === holder);
    if (victim === undefined) throw new Error(`no worker process holds the task (leased_by pid ${holder})`);
    // A few chunks in: the SIGKILL lands mid-task (the takeover is checked below, by attempts).
    await sleep(600);
    await victim.kill('SIGKILL');
    log(`      SIGKILLed ${victim.name} (pid ${holder}) while it ran ${taskId}`);
    const seen = await done;
    expectEqual(
      seen.find((m) => m.type === 'result')?.result?.structuredContent,
      expectedAnalysis(40_000, 2000),
      'analysis',
    );
    const { rows } = await admin.query<{ attempts: string }>(
      `select count(distinct attempt) as attempts from task_steps where task_id = $1`,
      [taskId],
    );
    if (Number(rows[0]?.attempts) < 2) throw new Error('the task was not taken over by another attempt');
  });
  await check('the session survives a restart of both instances, one after the other', async () => {
    for (const instance of http) await instance.restart();
    // The same client, the same Mcp-Session-Id, served by processes that never saw its initialize.
    const r = await client.callTool({ name: 'echo', arguments: { text: 'still here' } });
    expectEqual(r.content, [{ type: 'text', text: 'still here' }], 'echo');
    const seen = await runAsTask(client, 'confirm_action', { action: 'after the restart' });
    expectEqual(
      seen.find((m) => m.type === 'result')?.result?.content?.[0]?.text,
      'confirmed: after the restart',
      'result',
    );
  });
  await client.close();
  log(`processes that exited by themselves: ${cluster.unexpectedExits.length}`);
  failed += cluster.unexpectedExits.length;
} finally {
  await admin.end().catch(() => {});
  await cluster.stop();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
