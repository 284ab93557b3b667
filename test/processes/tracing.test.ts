// OpenTelemetry across real processes: a server process and worker processes configured only by the
// standard OTEL_* variables export over OTLP/HTTP to a receiver in this test. One task's trace starts at
// the client's `_meta.traceparent`, goes through the server's span and on into each worker's run leg and
// durable steps, including the leg of a second worker that took the task over after the first was SIGKILLed.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tracesExporterFromEnv } from '../../src/tracing-sdk.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { databaseEnv } from '../helpers/database-env.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { freePort } from '../helpers/ports.ts';
import { FAST_ENV, startTestProcess } from '../helpers/server-process.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** A span as OTLP/JSON encodes it, with its resource's attributes flattened beside it. */
interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  status: { code?: number };
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
}

type OtlpValue = {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
};
type OtlpKeyValue = { key: string; value: OtlpValue };

const flatten = (kvs: OtlpKeyValue[] | undefined) =>
  Object.fromEntries(
    (kvs ?? []).map(({ key, value }) => [
      key,
      value.stringValue ??
        (value.intValue !== undefined ? Number(value.intValue) : undefined) ??
        value.boolValue ??
        value.doubleValue,
    ]),
  );

/** An OTLP/HTTP receiver (JSON encoding, POST /v1/traces), as a collector would be. */
class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly contentTypes = new Set<string>();
  #server: Server | undefined;
  url = '';

  async start(): Promise<void> {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.method !== 'POST' || req.url !== '/v1/traces') {
          res.writeHead(404).end();
          return;
        }
        this.contentTypes.add(req.headers['content-type'] ?? '');
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          resourceSpans: Array<{
            resource: { attributes: OtlpKeyValue[] };
            scopeSpans: Array<{
              spans: Array<Omit<ReceivedSpan, 'attributes' | 'resource'> & { attributes: OtlpKeyValue[] }>;
            }>;
          }>;
        };
        for (const rs of body.resourceSpans) {
          const resource = flatten(rs.resource.attributes);
          for (const ss of rs.scopeSpans) {
            for (const s of ss.spans) this.spans.push({ ...s, attributes: flatten(s.attributes), resource });
          }
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    const port = await new Promise<number>((resolve) =>
      this.#server!.listen(0, '127.0.0.1', () => resolve((this.#server!.address() as { port: number }).port)),
    );
    this.url = `http://127.0.0.1:${port}`;
  }

  async waitFor(what: string, pick: (spans: ReceivedSpan[]) => boolean, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pick(this.spans)) {
      if (Date.now() > deadline) {
        throw new Error(
          `no ${what} in ${this.spans.length} spans: ${this.spans.map((s) => s.name).join(', ')}`,
        );
      }
      await sleep(50);
    }
  }

  stop(): Promise<void> {
    return new Promise((resolve) =>
      this.#server === undefined ? resolve() : this.#server.close(() => resolve()),
    );
  }
}

const SPAN_KIND_SERVER = 2;
const SPAN_KIND_CONSUMER = 5;
const STATUS_ERROR = 2;

let tdb: TestDatabase;
let receiver: OtlpReceiver;
let mcp: RawMcp;
const children: ChildProcess[] = [];

/** A process of the CLI (`durable-mcp-tasks server|worker`), tracing to the receiver. */
function cli(command: 'server' | 'worker', env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', command], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...FAST_ENV,
      ...databaseEnv(tdb.url),
      LOG_LEVEL: 'warn',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      // Small pools: several processes share the test Postgres with the file vitest runs beside this one.
      DB_POOL_MAX: '3',
      QUEUE_POOL_MAX: '2',
      // The sweeper is what takes a dead worker's task back once its lease lapses.
      SWEEP_INTERVAL_MS: '200',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  return { child, exited: new Promise<void>((resolve) => child.once('exit', () => resolve())) };
}

async function waitReady(base: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ok = await fetch(`${base}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${base} never became ready`);
    await sleep(100);
  }
}

beforeAll(async () => {
  tdb = await createTestDatabase();
  receiver = new OtlpReceiver();
  await receiver.start();
  const port = await freePort();
  cli('server', { PORT: String(port) });
  await waitReady(`http://127.0.0.1:${port}`);
  mcp = new RawMcp(`http://127.0.0.1:${port}/mcp`);
}, 90_000);

afterAll(async () => {
  await Promise.all(
    children
      .filter((c) => c.exitCode === null && c.signalCode === null)
      .map((c) => new Promise((resolve) => (c.once('exit', resolve), c.kill('SIGKILL')))),
  );
  await receiver?.stop();
  await tdb?.drop();
});

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

describe('traces from the client through the server into the workers', () => {
  it('one trace: the client span, the server span, each worker leg (one SIGKILLed) and its steps', async () => {
    const traceId = hex(16);
    const clientSpanId = hex(8);
    // 12 durable steps of 300 ms: the first worker dies a few steps in, the second finishes.
    const job = { count: 12_000, chunkSize: 1000, delayMsPerChunk: 300 };
    const a = cli('worker', { LEASE_MS: '1500' });
    const { taskId } = await mcp.callTool('analyze_numbers', job, {
      meta: { traceparent: `00-${traceId}-${clientSpanId}-01`, tracestate: 'vendor=abc' },
    });
    const inTrace = (spans: ReceivedSpan[]) => spans.filter((s) => s.traceId === traceId);

    // The server's span continues the client's, and names the tool and the task.
    await receiver.waitFor('server span', (s) => inTrace(s).some((x) => x.kind === SPAN_KIND_SERVER));
    const serverSpan = inTrace(receiver.spans).find((s) => s.kind === SPAN_KIND_SERVER)!;
    expect(serverSpan).toMatchObject({
      name: 'tools/call analyze_numbers',
      parentSpanId: clientSpanId,
      attributes: {
        'mcp.method.name': 'tools/call',
        'gen_ai.tool.name': 'analyze_numbers',
        'gen_ai.operation.name': 'execute_tool',
        'mcp.protocol.version': '2026-07-28',
        'durable_mcp.task.id': taskId,
      },
      resource: { 'service.name': 'durable-mcp-tasks', 'durable_mcp.role': 'server' },
    });

    // A few steps exported by the first worker, then it dies without ending its leg.
    await receiver.waitFor('3 steps', (s) => inTrace(s).filter((x) => x.name === 'step').length >= 3);
    a.child.kill('SIGKILL');
    await a.exited;
    const b = cli('worker', { LEASE_MS: '1500' });
    const done = await mcp.waitForTask(taskId as string, undefined, 60_000);
    expect(done.status).toBe('completed');

    await receiver.waitFor('the second leg', (s) =>
      inTrace(s).some((x) => x.kind === SPAN_KIND_CONSUMER && x.attributes['durable_mcp.task.attempt'] === 2),
    );
    const legs = inTrace(receiver.spans).filter((s) => s.kind === SPAN_KIND_CONSUMER);
    // Only the second leg ended (the first one's process was killed mid-leg), in a different process.
    expect(legs).toHaveLength(1);
    const leg = legs[0]!;
    expect(leg).toMatchObject({
      name: 'execute_tool analyze_numbers',
      parentSpanId: serverSpan.spanId,
      attributes: {
        'durable_mcp.task.id': taskId,
        'durable_mcp.leg.outcome': 'completed',
        'gen_ai.tool.name': 'analyze_numbers',
      },
      resource: { 'durable_mcp.role': 'worker', 'process.pid': b.child.pid },
    });

    // Every chunk ran as a step span once: the first worker's steps (children of its leg, which never
    // ended) and the second worker's, children of the second leg. None is replayed as a span.
    const steps = inTrace(receiver.spans).filter((s) => s.name === 'step');
    const byName = new Map<string, ReceivedSpan[]>();
    for (const s of steps)
      byName.set(String(s.attributes['durable_mcp.step.name']), [
        ...(byName.get(String(s.attributes['durable_mcp.step.name'])) ?? []),
        s,
      ]);
    expect([...byName.keys()].sort()).toEqual(Array.from({ length: 12 }, (_, i) => `chunk-${i + 1}`).sort());
    const fromA = steps.filter((s) => s.resource['process.pid'] === a.child.pid);
    const fromB = steps.filter((s) => s.resource['process.pid'] === b.child.pid);
    expect(fromA.length).toBeGreaterThanOrEqual(3);
    expect(fromB.length).toBeGreaterThan(0);
    expect(fromB.every((s) => s.parentSpanId === leg.spanId)).toBe(true);
    // The first leg: one span id all its steps share, not the second leg's, in the same trace.
    const firstLegIds = new Set(fromA.map((s) => s.parentSpanId));
    expect(firstLegIds.size).toBe(1);
    expect(firstLegIds.has(leg.spanId)).toBe(false);
    // A step the first worker finished is not run again (the kill may cut one mid-run, never exported).
    expect(fromA.length + fromB.length).toBeLessThanOrEqual(13);
    expect(receiver.contentTypes).toEqual(new Set(['application/json']));
    // What the worker continued: the server span's context, stored with the task.
    const row = await tdb.db
      .selectFrom('tasks')
      .select('trace_context')
      .where('task_id', '=', taskId as string)
      .executeTakeFirstOrThrow();
    expect(row.trace_context).toEqual({
      traceparent: `00-${traceId}-${serverSpan.spanId}-01`,
      tracestate: 'vendor=abc',
    });
    // pg-boss's own instrumentation is off: no span per poll.
    expect(receiver.spans.filter((s) => s.name.includes('task-run'))).toEqual([]);
  }, 120_000);

  it('the HTTP traceparent header when _meta has none; errors recorded on the span', async () => {
    const traceId = hex(16);
    const parent = hex(8);
    const missing = await mcp.error(
      'tasks/get',
      { taskId: 'no-such-task' },
      { headers: { traceparent: `00-${traceId}-${parent}-01` } },
    );
    await receiver.waitFor('tasks/get span', (s) => s.some((x) => x.traceId === traceId));
    const span = receiver.spans.find((s) => s.traceId === traceId)!;
    expect(span).toMatchObject({
      name: 'tasks/get',
      parentSpanId: parent,
      kind: SPAN_KIND_SERVER,
      status: { code: STATUS_ERROR },
      attributes: { 'error.type': String(missing.code), 'rpc.response.status_code': String(missing.code) },
    });
  });

  it('a call with no trace context starts a trace of its own, which the worker continues', async () => {
    cli('worker', {});
    const before = new Set(receiver.spans.map((s) => s.spanId));
    const { taskId } = await mcp.callTool('analyze_numbers', { count: 10 });
    await mcp.waitForTask(taskId as string);
    const fresh = () => receiver.spans.filter((s) => !before.has(s.spanId));
    await receiver.waitFor('the leg', () =>
      fresh().some((s) => s.kind === SPAN_KIND_CONSUMER && s.attributes['durable_mcp.task.id'] === taskId),
    );
    const server = fresh().find(
      (s) => s.kind === SPAN_KIND_SERVER && s.attributes['durable_mcp.task.id'] === taskId,
    )!;
    const leg = fresh().find(
      (s) => s.kind === SPAN_KIND_CONSUMER && s.attributes['durable_mcp.task.id'] === taskId,
    )!;
    expect(server.parentSpanId ?? '').toBe('');
    expect(leg.traceId).toBe(server.traceId);
    expect(leg.parentSpanId).toBe(server.spanId);
  });
});

describe('tracing is off unless an exporter is configured', () => {
  it('with no SDK registered, a traced request stores no trace context', async () => {
    const rt = await startTestProcess({ databaseUrl: tdb.url, role: 'server' });
    try {
      const { taskId } = await new RawMcp(rt.url).callTool(
        'analyze_numbers',
        { count: 1 },
        { meta: { traceparent: `00-${hex(16)}-${hex(8)}-01` } },
      );
      const row = await tdb.db
        .selectFrom('tasks')
        .select('trace_context')
        .where('task_id', '=', taskId as string)
        .executeTakeFirstOrThrow();
      expect(row.trace_context).toBeNull();
    } finally {
      await rt.stop();
    }
  });

  it('reads the standard variables', () => {
    expect(tracesExporterFromEnv({})).toBeUndefined();
    expect(tracesExporterFromEnv({ OTEL_SERVICE_NAME: 'x' })).toBeUndefined();
    expect(tracesExporterFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toBe('otlp');
    expect(tracesExporterFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' })).toBe(
      'otlp',
    );
    expect(tracesExporterFromEnv({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe('otlp');
    expect(tracesExporterFromEnv({ OTEL_TRACES_EXPORTER: 'console' })).toBe('console');
    expect(
      tracesExporterFromEnv({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c' }),
    ).toBeUndefined();
    expect(
      tracesExporterFromEnv({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c' }),
    ).toBeUndefined();
  });
});
