// The exact statements our hot paths send, captured from the real code against a real database, so that a
// baseline (a bare route, pgbench) runs the same SQL: tasks/get's SELECT and tools/call's create transaction.
import pg from 'pg';
import { createDb } from '../../src/db/database.ts';
import { BossTaskQueue, createBoss } from '../../src/queue/boss.ts';
import { TaskService } from '../../src/tasks/service.ts';
import { getTaskView } from '../../src/tasks/store/read.ts';

export interface Statement {
  text: string;
  values: unknown[];
}

/** Runs `fn` and returns every statement any pg client in this process sent meanwhile. */
async function captured(fn: () => Promise<unknown>): Promise<Statement[]> {
  const seen: Statement[] = [];
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const [q, v] = args;
    if (typeof q === 'string') seen.push({ text: q, values: Array.isArray(v) ? v : [] });
    else if (q !== null && typeof q === 'object' && 'text' in q) {
      const o = q as { text: string; values?: unknown[] };
      seen.push({ text: o.text, values: o.values ?? (Array.isArray(v) ? v : []) });
    }
    return original.apply(this, args);
  };
  try {
    await fn();
  } finally {
    proto.query = original;
  }
  return seen;
}

/**
 * tasks/get's SELECT (one round trip) and the create as the server runs it with no worker in its process
 * (one statement: the admission, the task, pg-boss's job, the wake-up), with the ids they used; and `createTransaction`,
 * the same create as the transaction it was before (BEGIN, task INSERT, job INSERT, NOTIFY, COMMIT).
 */
export async function captureHotPaths(
  connectionString: string,
  tool: { name: string; arguments: Record<string, unknown> } = { name: 'echo', arguments: { text: 'x' } },
) {
  const { db } = createDb({ connectionString, max: 1 });
  const boss = createBoss({ connectionString, max: 1 });
  boss.on('error', () => {});
  await boss.start();
  try {
    const queue = new BossTaskQueue(boss);
    const createWith = async (tasks: TaskService) => {
      let taskId = '';
      const statements = await captured(async () => {
        const view = await tasks.create({
          principal: 'local',
          toolName: tool.name,
          arguments: tool.arguments,
          prepared: undefined,
          clientCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } },
          ttlMs: 3_600_000,
          pollIntervalMs: 1000,
        });
        taskId = view.taskId;
      });
      return { taskId, statements };
    };
    // A queue that cannot give its part as SQL: the create falls back to its transaction.
    const inTransaction = await createWith(
      new TaskService({ db, queue: { enqueueRun: (...args) => queue.enqueueRun(...args) } }),
    );
    // A principal's creates after its first on an instance: their admission is part of the one statement.
    const service = new TaskService({ db, queue });
    await createWith(service);
    const { taskId, statements: create } = await createWith(service);
    const get = await captured(() => getTaskView(db, taskId, 'local'));
    return {
      taskId,
      create,
      // The five statements alone: from BEGIN (the admission before it came later).
      createTransaction: {
        taskId: inTransaction.taskId,
        statements: inTransaction.statements.slice(
          inTransaction.statements.findIndex((s) => /^\s*begin\b/i.test(s.text)),
        ),
      },
      get: get.at(-1)!,
    };
  } finally {
    await boss.stop({ graceful: false, close: true }).catch(() => {});
    await db.destroy();
  }
}
