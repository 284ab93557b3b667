// The database an operator command works on, opened for one command and closed after it; and, for the
// commands that queue runs (resume, fork), the run queue on it.
import os from 'node:os';
import path from 'node:path';
import { checkPostgresUrl, loadConfig } from '../config.ts';
import { createDb, type Db } from '../db/database.ts';
import { openEmbeddedPostgres, type RunningPostgres } from '../db/embedded.ts';
import { coerceError, createLogger } from '../log.ts';
import { BossTaskQueue, createBoss } from '../queue/boss.ts';
import type { TaskQueue } from '../queue/task-queue.ts';
import type { Actor } from '../tasks/store/actions.ts';

/**
 * The database the server and workers use: DATABASE_URL, or when it is unset (as with `start`) this
 * folder's embedded Postgres, which the command says on stderr.
 */
async function openDatabase(): Promise<RunningPostgres> {
  const url = process.env.DATABASE_URL;
  if (url !== undefined && url !== '') {
    return { connectionString: checkPostgresUrl('DATABASE_URL', url), stop: async () => {} };
  }
  const { EMBEDDED_PG_DIR: dataDir, EMBEDDED_PG_PORT: port } = loadConfig({
    EMBEDDED_PG_DIR: process.env.EMBEDDED_PG_DIR,
    EMBEDDED_PG_PORT: process.env.EMBEDDED_PG_PORT,
  });
  const embedded = await openEmbeddedPostgres({ dataDir, port, log: createLogger('warn') });
  process.stderr.write(
    `DATABASE_URL is unset: using the embedded Postgres in ${path.resolve(dataDir)}` +
      `${embedded.started ? ' (started for this command)' : ''}\n`,
  );
  return embedded;
}

/** Runs `fn` on the database (and, with `queue`, on pg-boss's run queue too), then closes both. */
export async function withDb<T>(
  fn: (db: Db, queue: TaskQueue) => Promise<T>,
  { queue = false } = {},
): Promise<T> {
  const postgres = await openDatabase();
  const { db } = createDb({
    connectionString: postgres.connectionString,
    max: 2,
    applicationName: 'durable-mcp-tasks:cli',
  });
  const boss = queue ? createBoss({ connectionString: postgres.connectionString, max: 1 }) : undefined;
  try {
    if (boss !== undefined) {
      boss.on('error', (err) => process.stderr.write(`pg-boss: ${coerceError(err).message}\n`));
      await boss.start();
    }
    return await fn(db, boss === undefined ? NO_QUEUE : new BossTaskQueue(boss));
  } finally {
    await boss?.stop({ graceful: false, close: true });
    await db.destroy();
    await postgres.stop();
  }
}

const NO_QUEUE: TaskQueue = {
  enqueueRun: () => Promise.reject(new Error('this command opened no run queue')),
};

/** Who runs this command, for the audit trail: `cli:<user>@<host>`. */
export function cliActor(): Actor {
  let user = process.env.USER ?? 'unknown';
  try {
    user = os.userInfo().username;
  } catch {
    // (no passwd entry for this uid, in some containers)
  }
  return `cli:${user}@${os.hostname()}`;
}
