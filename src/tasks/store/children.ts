// Child tasks (ctx.callTool, ctx.spawn): ordinary tasks of their parent's principal, created once per
// (parent, name) and fenced by the parent's attempt; what a parent waiting for them reads; and its
// wake-up when one ends. (Cancelling them with their parent is a trigger: migration add_task_children.)
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { TaskQueue } from '../../queue/task-queue.ts';
import { newTaskId } from '../ids.ts';
import { insertTask, type NewTask } from './create.ts';
import { LeaseLostError } from './lease.ts';

/** How far a task's children may go: MAX_CHILD_DEPTH and MAX_CHILDREN_PER_TASK. */
export interface ChildLimits {
  maxDepth: number;
  maxPerTask: number;
}

/** A child the limits refused, naming the setting. */
export interface ChildRefusal {
  setting: 'MAX_CHILD_DEPTH' | 'MAX_CHILDREN_PER_TASK';
  limit: number;
}

/** The spawning attempt: the parent task and the attempt that holds it. */
export interface SpawningAttempt {
  taskId: string;
  attempt: number;
}

async function childNamed(db: Kysely<Database>, parentTaskId: string, name: string) {
  const row = await db
    .selectFrom('tasks')
    .select('task_id')
    .where('spawned_by', '=', parentTaskId)
    .where('spawn_name', '=', name)
    .executeTakeFirst();
  return row?.task_id;
}

const isSpawnRace = (err: unknown) => {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && e.constraint === 'tasks_spawned_idx';
};

/**
 * The child `parent` spawned under `name`: the one an earlier attempt created (a worker that died
 * before its checkpoint), or a new task with its first run queued, in one transaction fenced by the
 * parent's attempt (LeaseLostError) and bounded by `limits` (a refusal, nothing created). Children are
 * not admitted against the principal's creation quotas (see docs/tools.md "Child tasks").
 */
export async function spawnChild(
  db: Kysely<Database>,
  queue: TaskQueue,
  parent: SpawningAttempt,
  child: Omit<NewTask, 'taskId' | 'spawn'> & { name: string; detached: boolean },
  limits: ChildLimits,
): Promise<{ taskId: string } | { refused: ChildRefusal }> {
  const earlier = await childNamed(db, parent.taskId, child.name);
  if (earlier !== undefined) return { taskId: earlier };
  const { name, detached, ...task } = child;
  try {
    return await db.transaction().execute(async (trx) => {
      // The parent's row lock serializes its children's creations: the count holds.
      const { rows } = await sql<{ depth: number; children: number }>`
        select p.spawn_depth as depth,
          (select count(*)::int from tasks c where c.spawned_by = p.task_id) as children
        from tasks p
        where p.task_id = ${parent.taskId} and p.attempt = ${parent.attempt} and p.status = 'working'
        for update of p`.execute(trx);
      const row = rows[0];
      if (row === undefined) throw new LeaseLostError(parent.taskId, parent.attempt);
      if (row.depth + 1 > limits.maxDepth) {
        return { refused: { setting: 'MAX_CHILD_DEPTH', limit: limits.maxDepth } as const };
      }
      if (row.children >= limits.maxPerTask) {
        return { refused: { setting: 'MAX_CHILDREN_PER_TASK', limit: limits.maxPerTask } as const };
      }
      const view = await insertTask(trx, {
        ...task,
        taskId: newTaskId(),
        spawn: { parentTaskId: parent.taskId, name, depth: row.depth + 1, detached },
      });
      await queue.enqueueRun(trx, view.taskId);
      return { taskId: view.taskId };
    });
  } catch (err) {
    // Another attempt of the parent created it meanwhile (one that lost its lease, still running).
    const raced = isSpawnRace(err) ? await childNamed(db, parent.taskId, child.name) : undefined;
    if (raced === undefined) throw err;
    return { taskId: raced };
  }
}

/** A child as its parent sees it: its status, and its result or error once it ended. */
export interface ChildState {
  taskId: string;
  toolName: string;
  status: string;
  statusMessage: string | null;
  result: unknown;
  error: unknown;
  /** When it last changed: the order in which children ended (ctx.joinFirst). */
  lastUpdatedAt: string;
}

/** The children among `taskIds` that still exist (purged ones are missing), in no particular order. */
export async function readChildren(
  db: Kysely<Database>,
  parentTaskId: string,
  taskIds: readonly string[],
): Promise<ChildState[]> {
  if (taskIds.length === 0) return [];
  const rows = await db
    .selectFrom('tasks')
    .select(['task_id', 'tool_name', 'status', 'status_message', 'result', 'error'])
    .select(sql<string>`to_char(last_updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')`.as('at'))
    .where('spawned_by', '=', parentTaskId)
    .where('task_id', 'in', taskIds)
    .execute();
  return rows.map((r) => ({
    taskId: r.task_id,
    toolName: r.tool_name,
    status: r.status,
    statusMessage: r.status_message,
    result: r.result,
    error: r.error,
    lastUpdatedAt: r.at,
  }));
}

/** How a join waits: every child ended (or one failed), or the first one ended. */
export type JoinMode = 'all' | 'first';

/** True once a join of `taskIds` in `mode` has what it waits for (one query; see readChildren). */
export async function childrenSettled(
  db: Kysely<Database>,
  parentTaskId: string,
  taskIds: readonly string[],
  mode: JoinMode,
): Promise<boolean> {
  const { rows } = await sql<{ active: number; ended: number; failed: number }>`
    select count(*) filter (where status in ('working', 'input_required'))::int as active,
      count(*) filter (where status not in ('working', 'input_required'))::int as ended,
      count(*) filter (where status in ('failed', 'cancelled'))::int as failed
    from tasks where spawned_by = ${parentTaskId} and task_id = any(${[...taskIds]}::text[])`.execute(db);
  const row = rows[0]!;
  if (mode === 'first') return row.ended > 0 || row.active === 0;
  return row.active === 0 || row.failed > 0;
}

/**
 * A child ended (committed): its parent runs again (its join reads the children), if it still runs. A
 * parent waiting for something else replays to its wait and parks again. The parent's row is locked
 * first: a parent parking right now (settle.ts: handBack, which looked at its children before this
 * child's end committed) has released it by then, so its run is claimed; one that parks later looks
 * after this child's end. (Without the lock the run's claim could see the parent still leased and be
 * turned away, and the parent would wait for its backstop look.) Run it in a transaction of its own,
 * after the child's end committed: one that also locks the child could deadlock with a parent that ends.
 */
export async function wakeSpawner(
  trx: Kysely<Database>,
  queue: TaskQueue,
  parentTaskId: string,
): Promise<void> {
  const parent = await trx
    .selectFrom('tasks')
    .select('task_id')
    .where('task_id', '=', parentTaskId)
    .where('status', '=', 'working')
    .where('paused_at', 'is', null)
    .forShare()
    .executeTakeFirst();
  if (parent !== undefined) await queue.enqueueRun(trx, parentTaskId);
}

/** wakeSpawner, each in its own transaction, for the parents of those of `taskIds` that are children. */
export async function wakeSpawnersOf(
  db: Kysely<Database>,
  queue: TaskQueue,
  taskIds: readonly string[],
): Promise<void> {
  if (taskIds.length === 0) return;
  const rows = await db
    .selectFrom('tasks')
    .select('spawned_by')
    .distinct()
    .where('task_id', 'in', taskIds)
    .where('spawned_by', 'is not', null)
    .execute();
  for (const { spawned_by } of rows) {
    await db.transaction().execute((trx) => wakeSpawner(trx, queue, spawned_by!));
  }
}
