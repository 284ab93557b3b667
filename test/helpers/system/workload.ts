/**
 * The cluster tests' workload: tasks of every shipped kind driven through the load balancer by
 * independent clients (ext-tasks' withTasks, and raw HTTP), each checked against an answer computed
 * here; and the database check that no acknowledged task was lost or run to completion twice.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import {
  createApplicationInputHandler,
  resultFromTaskOutcome,
  withTasks,
} from '@modelcontextprotocol/ext-tasks/client';
import pg from 'pg';
import { expectedAnalysis } from '../analysis.ts';
import { extTasksPort } from '../ext-tasks.ts';
import { META_IDEMPOTENCY_KEY } from '../../../src/core/wire.ts';
import { clientIdempotency } from '../../../src/tasks/store/idempotency.ts';
import { postMcp, type RequestOptions, type RpcReply } from '../mcp.ts';
import { waitFor } from '../wait.ts';

const TERMINAL = ['completed', 'failed', 'cancelled'];

/** One reply a client saw that was not a success: what a user of the cluster would notice. */
export interface ClientError {
  at: number;
  method: string;
  what: string;
}

export interface WorkloadCounts {
  analyze: number;
  confirm: number;
  cancel: number;
  fail: number;
}

type Outcome = { kind: string; taskId?: string; ok: boolean; detail: string };

export class Workload {
  readonly url: string;
  readonly httpPorts: readonly number[];
  readonly counts: WorkloadCounts;
  readonly outcomes: Outcome[] = [];
  readonly acknowledged = new Set<string>();
  /** Every failed request (transport error, 5xx, JSON-RPC error a correct client would not get). */
  readonly clientErrors: ClientError[] = [];
  crossInstanceUpdates = 0;
  /** The stored form (a digest) of every idempotency key this workload sent. */
  readonly #keys = new Set<string>();
  /** Creates sent again after a lost reply, with their idempotency key. */
  createsRetried = 0;
  /** Cancel jobs whose task ended `completed`: their cancel must have come after the end. */
  readonly lateCancels = new Set<string>();
  readonly #chunkDelayMs: number;

  constructor(opts: {
    url: string;
    httpPorts: readonly number[];
    counts: WorkloadCounts;
    chunkDelayMs?: number;
  }) {
    this.url = opts.url;
    this.httpPorts = opts.httpPorts;
    this.counts = opts.counts;
    this.#chunkDelayMs = opts.chunkDelayMs ?? 100;
  }

  /**
   * One JSON-RPC request. Transient failures (connection resets, 5xx, -32603) are recorded as
   * client-visible errors and retried, as a client would: reads always, a `tools/call` when the reply
   * proves it created nothing (a JSON-RPC error), or after a lost reply when it carries an idempotency
   * key (the retry gets the task the lost call created, if it did). Gives up after 200 attempts (20 s
   * and more).
   */
  async rpc(
    method: string,
    params: Record<string, unknown>,
    opts: RequestOptions & { url?: string; headers?: Record<string, string>; signal?: AbortSignal } = {},
  ): Promise<RpcReply> {
    const retriable = method !== 'tools/call' || opts.meta?.[META_IDEMPOTENCY_KEY] !== undefined;
    for (let attempt = 0; ; attempt++) {
      let failure: string;
      try {
        const reply = await postMcp(opts.url ?? this.url, method, params, opts);
        const code = reply.body.error?.code as number | undefined;
        if (reply.status < 500 && code !== -32603) return reply;
        failure = `HTTP ${reply.status}${code === undefined ? '' : ` ${code}`}`;
        // A 5xx from the balancer, or -32603 from an instance: either way nothing was committed.
        this.clientErrors.push({ at: Date.now(), method, what: failure });
        if (attempt >= 200) return reply;
      } catch (err) {
        failure = `transport: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : String(err)}`;
        this.clientErrors.push({ at: Date.now(), method, what: failure });
        // A lost reply to tools/call may have created a task: without a key a client cannot know, so it gives up.
        if (!retriable || attempt >= 200) throw err;
        if (method === 'tools/call') this.createsRetried++;
      }
      await sleep(100);
    }
  }

  /** Polls tasks/get (through `rpc`, so retrying through outages) until `until` holds. */
  async poll(taskId: string, until: (t: Record<string, any>) => boolean, timeoutMs = 120_000) {
    let last: unknown;
    return waitFor(
      async () => {
        const r = await this.rpc('tasks/get', { taskId });
        last = r.body;
        const task = r.body.result as Record<string, any> | undefined;
        return task !== undefined && until(task) && task;
      },
      { timeoutMs, intervalMs: 50, what: () => `task ${taskId} settling (last: ${JSON.stringify(last)})` },
    );
  }

  async #created(name: string, args: Record<string, unknown>): Promise<{ taskId: string; upstream: string }> {
    // Each create names its own key: a retry after a lost reply gets the task the first call made.
    const key = randomUUID();
    this.#keys.add(clientIdempotency(key, name, args).key);
    const created = await this.rpc(
      'tools/call',
      { name, arguments: args },
      { meta: { [META_IDEMPOTENCY_KEY]: key } },
    );
    const taskId = created.body.result?.taskId as string | undefined;
    if (taskId === undefined)
      throw new Error(`tools/call ${name} created no task: ${JSON.stringify(created.body)}`);
    this.acknowledged.add(taskId);
    return { taskId, upstream: created.headers.get('x-upstream') ?? '' };
  }

  async #analyze(session: ReturnType<typeof withTasks>, i: number): Promise<void> {
    const count = 20_000 + ((i * 7919) % 80_000);
    const args = { count, chunkSize: 5000, delayMsPerChunk: this.#chunkDelayMs };
    const ex = await session.callTool('analyze_numbers', args);
    if (ex.kind === 'task') this.acknowledged.add(ex.handle.taskId);
    const { outcome } = await ex.settle();
    const result = resultFromTaskOutcome(outcome) as { structuredContent?: unknown };
    const ok = isDeepStrictEqual(result.structuredContent, expectedAnalysis(count, 5000));
    this.outcomes.push({
      kind: 'analyze',
      taskId: ex.kind === 'task' ? ex.handle.taskId : undefined,
      ok,
      detail: ok ? '' : JSON.stringify(result),
    });
  }

  async #confirm(i: number): Promise<void> {
    const accept = i % 2 === 0;
    const { taskId, upstream } = await this.#created('confirm_action', { action: `op-${i}` });
    await this.poll(taskId, (t) => t.status === 'input_required');
    // Answer through the other instance than the one that created the task (nginx said which one did).
    const response = accept ? { action: 'accept', content: { confirm: true } } : { action: 'decline' };
    const other = this.httpPorts.find((p) => !upstream.endsWith(`:${p}`));
    const ack = await this.rpc(
      'tasks/update',
      { taskId, inputResponses: { confirm: response } },
      { url: `http://127.0.0.1:${other}/mcp` },
    );
    if (ack.body.result?.resultType === 'complete' && upstream !== '') this.crossInstanceUpdates++;
    const done = await this.poll(taskId, (t) => TERMINAL.includes(t.status as string));
    const want = `${accept ? 'confirmed' : 'declined'}: op-${i}`;
    const ok = done.status === 'completed' && done.result?.content?.[0]?.text === want;
    this.outcomes.push({ kind: 'confirm', taskId, ok, detail: ok ? '' : JSON.stringify(done) });
  }

  async #cancel(): Promise<void> {
    const { taskId } = await this.#created('analyze_numbers', {
      count: 100_000,
      chunkSize: 5000,
      delayMsPerChunk: 250,
    });
    await this.poll(taskId, (t) => typeof t.statusMessage === 'string' || t.status !== 'working');
    await this.rpc('tasks/cancel', { taskId });
    const done = await this.poll(taskId, (t) => TERMINAL.includes(t.status as string));
    if (done.status === 'completed') {
      // Right only if the cancel reached the server after the task had ended (its requests were
      // failing meanwhile): `check` reads that no cancel request was ever recorded on the task.
      this.lateCancels.add(taskId);
    }
    this.outcomes.push({
      kind: 'cancel',
      taskId,
      ok: done.status === 'cancelled' || done.status === 'completed',
      detail: JSON.stringify(done.status),
    });
  }

  async #fail(i: number): Promise<void> {
    const kind = i % 2 === 0 ? 'tool' : 'protocol';
    const { taskId } = await this.#created('fail_with', { kind });
    const done = await this.poll(taskId, (t) => TERMINAL.includes(t.status as string));
    const ok =
      kind === 'tool'
        ? done.status === 'completed' && done.result?.isError === true
        : done.status === 'failed' && done.error?.code === -32603;
    this.outcomes.push({ kind: `fail:${kind}`, taskId, ok, detail: ok ? '' : JSON.stringify(done) });
  }

  get total(): number {
    const c = this.counts;
    return c.analyze + c.confirm + c.cancel + c.fail;
  }

  /** Runs every job, `concurrency` at a time, in a fixed interleaving of kinds. */
  async run(concurrency: number): Promise<void> {
    // ext-tasks' withTasks over the suite's port, each request through `rpc` (retries and all).
    const port = extTasksPort(this.url, { send: (method, params, o) => this.rpc(method, params, o) });
    const session = withTasks(port, {
      onInputRequest: createApplicationInputHandler({
        elicitation: async () => ({ action: 'cancel' }),
        sampling: async () => {
          throw new Error('unsupported');
        },
        roots: async () => ({ roots: [] }),
      }),
    });
    const c = this.counts;
    const jobs: Array<() => Promise<void>> = [
      ...Array.from({ length: c.analyze }, (_, i) => () => this.#analyze(session, i)),
      ...Array.from({ length: c.confirm }, (_, i) => () => this.#confirm(i)),
      ...Array.from({ length: c.cancel }, () => () => this.#cancel()),
      ...Array.from({ length: c.fail }, (_, i) => () => this.#fail(i)),
    ];
    // A fixed shuffle (Fisher-Yates with a small LCG), so that kinds interleave the same way every run.
    for (let i = jobs.length - 1, seed = 42; i > 0; i--) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      const j = seed % (i + 1);
      [jobs[i], jobs[j]] = [jobs[j]!, jobs[i]!];
    }
    let next = 0;
    try {
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < jobs.length) {
            const job = jobs[next++]!;
            await job().catch((err: unknown) =>
              this.outcomes.push({ kind: 'client-error', ok: false, detail: String(err) }),
            );
          }
        }),
      );
    } finally {
      await session.close().catch(() => {});
    }
  }

  /**
   * Reads every task from the database and compares: acknowledged tasks all stored, every completed
   * analyze task with exactly one checkpoint per chunk. Prints the figures; returns the failure count.
   */
  async check(dbUrl: string, log: (msg: string) => void): Promise<number> {
    const db = new pg.Client({ connectionString: dbUrl });
    await db.connect();
    const rows = (
      await db.query<{
        task_id: string;
        status: string;
        tool_name: string;
        steps: string;
        resumed: boolean;
        cancel_requested: boolean;
        args: { count?: number; chunkSize?: number };
        key: string | null;
      }>(
        `select t.task_id, t.status, t.tool_name, t.arguments as args, t.idempotency_key as key,
                t.cancel_requested_at is not null as cancel_requested,
                (select count(*) from task_steps s where s.task_id = t.task_id) as steps,
                (select count(distinct attempt) > 1 from task_steps s where s.task_id = t.task_id) as resumed
           from tasks t`,
      )
    ).rows;
    await db.end();
    const stored = new Map(rows.map((r) => [r.task_id, r]));
    const lost = [...this.acknowledged].filter((id) => !stored.has(id));
    // A create retried after a lost reply must not have left a second task no client knows of.
    // (Only this workload's keys: several workloads may run on one database, one after the other.)
    const duplicated = rows.filter(
      (r) => r.key !== null && this.#keys.has(r.key) && !this.acknowledged.has(r.task_id),
    );
    const wrongSteps = rows.filter(
      (r) =>
        r.tool_name === 'analyze_numbers' &&
        r.status === 'completed' &&
        Number(r.steps) !== Math.ceil((r.args.count ?? 0) / (r.args.chunkSize ?? 100_000)),
    );
    // A cancel acknowledged while the task was still active must win (finishAttempt): a completed task
    // with a recorded cancel request is wrong.
    for (const o of this.outcomes) {
      if (
        o.kind === 'cancel' &&
        this.lateCancels.has(o.taskId ?? '') &&
        stored.get(o.taskId!)?.cancel_requested
      )
        Object.assign(o, { ok: false, detail: 'completed although its cancel was recorded while it ran' });
    }
    const bad = this.outcomes.filter((o) => !o.ok);
    const byKind = new Map<string, { ok: number; bad: number }>();
    for (const o of this.outcomes) {
      const k = byKind.get(o.kind) ?? { ok: 0, bad: 0 };
      if (o.ok) k.ok++;
      else k.bad++;
      byKind.set(o.kind, k);
    }
    log(`acknowledged tasks: ${this.acknowledged.size}; stored: ${rows.length}; lost: ${lost.length}`);
    log(
      `creates retried after a lost reply (idempotency key): ${this.createsRetried}; tasks no client holds: ${duplicated.length}`,
    );
    for (const [kind, k] of byKind) log(`  ${kind.padEnd(14)} right: ${k.ok}  wrong: ${k.bad}`);
    log(`input answered through the other instance: ${this.crossInstanceUpdates}/${this.counts.confirm}`);
    if (this.lateCancels.size > 0)
      log(`cancels that reached the server after their task had ended: ${this.lateCancels.size}`);
    log(`completed analyze tasks with a step count other than their chunks: ${wrongSteps.length}`);
    log(
      `tasks whose checkpoints span several attempts (taken over): ${rows.filter((r) => r.resumed).length}`,
    );
    for (const o of bad.slice(0, 10)) log(`  WRONG ${o.kind} ${o.taskId ?? ''}: ${o.detail.slice(0, 300)}`);
    const missing = this.total - this.outcomes.length;
    return (
      bad.length +
      lost.length +
      duplicated.length +
      wrongSteps.length +
      missing +
      (this.crossInstanceUpdates < this.counts.confirm ? 1 : 0)
    );
  }

  /** Client-visible errors between two instants, by kind. */
  errorsBetween(from: number, to: number): string {
    const counts = new Map<string, number>();
    for (const e of this.clientErrors)
      if (e.at >= from && e.at <= to) counts.set(e.what, (counts.get(e.what) ?? 0) + 1);
    const total = [...counts.values()].reduce((a, b) => a + b, 0);
    return `${total}${total === 0 ? '' : ` (${[...counts].map(([k, n]) => `${k}: ${n}`).join(', ')})`}`;
  }
}
