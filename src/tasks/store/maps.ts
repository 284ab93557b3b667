// A map's items (ctx.map) are child tasks of the task that called it: inserted at once, dispatched at
// most `concurrency` at a time. An item that completes hands its turn to the next pending item in the
// same statement (claimed by the same worker), so the number dispatched never grows; the last one
// wakes the parent. Nothing here counts in memory: a crash anywhere leaves rows a later leg reads.
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { ACTIVE_STATUSES } from '../status.ts';
import {
  CLAIMED_COLUMNS,
  claimDeadline,
  claimedFromJson,
  type ClaimedJson,
  type ClaimedTask,
} from './lease.ts';

/** Where a map's items are: the parent task and the map's name. */
export interface MapRef {
  parentTaskId: string;
  mapName: string;
}

const ofMap = ({ parentTaskId, mapName }: MapRef) =>
  sql<boolean>`parent_task_id = ${parentTaskId} and map_name = ${mapName}`;

/** Not yet dispatched: `working` with no claim deadline (tasks_map_items_pending_idx). */
const PENDING = sql<boolean>`status = 'working' and lease_expires_at is null`;

/**
 * Inserts a map's `count` items as children (ids `<parent>_<map hash>_<index>`: of the shape of every
 * task id, longer than a top-level one) of its parent (fenced by the parent's attempt), none of
 * them dispatched yet. Items already there are kept: a replay after a crash inserts nothing twice.
 */
export async function insertMapItems(
  db: Kysely<Database>,
  parent: { taskId: string; attempt: number },
  mapName: string,
  count: number,
): Promise<void> {
  await sql`
    insert into tasks (task_id, principal, tool_name, arguments, client_capabilities, status, ttl_ms,
      poll_interval_ms, expires_at, trace_context, parent_task_id, map_name, map_index)
    select p.task_id || '_' || left(md5(${mapName}), 12) || '_' || g, p.principal, p.tool_name, '{}'::jsonb,
      p.client_capabilities, 'working', p.ttl_ms, p.poll_interval_ms, p.expires_at, p.trace_context,
      p.task_id, ${mapName}, g
    from tasks p, generate_series(0, ${count - 1}::int) g
    where p.task_id = ${parent.taskId} and p.attempt = ${parent.attempt} and p.status = 'working'
    on conflict do nothing`.execute(db);
}

/**
 * Dispatches pending items, in order, until `concurrency` are dispatched and not finished (running,
 * queued, or backing off before a retry); the caller enqueues a run for each id returned, in this
 * transaction. Idempotent: a replay that calls it again dispatches only what is missing.
 */
export async function dispatchMapItems(
  db: Kysely<Database>,
  map: MapRef,
  concurrency: number,
): Promise<string[]> {
  const { rows } = await sql<{ task_id: string }>`
    with dispatched as (
      select count(*)::int as n from tasks
      where ${ofMap(map)} and status = 'working' and lease_expires_at is not null
    ), next as (
      select task_id from tasks where ${ofMap(map)} and ${PENDING}
      order by map_index
      limit greatest(0, ${concurrency}::int - (select n from dispatched))
      for update skip locked
    )
    update tasks t set lease_expires_at = ${claimDeadline()}
    from next where t.task_id = next.task_id
    returning t.task_id`.execute(db);
  return rows.map((r) => r.task_id);
}

export interface MapState {
  total: number;
  completed: number;
  /** Items not finished yet (pending, dispatched or running). */
  active: number;
  /** The first item (by index) that failed or was cancelled, with why. */
  failed?: { index: number; message: string; failures: number } | undefined;
}

export async function readMapState(db: Kysely<Database>, map: MapRef): Promise<MapState> {
  // (The first failure is an uncorrelated subquery: run once, not once per item.)
  const { rows } = await sql<{
    total: number;
    completed: number;
    active: number;
    failed: { index: number; message: string | null; failures: number } | null;
  }>`
    select count(*)::int as total,
      count(*) filter (where status = 'completed')::int as completed,
      count(*) filter (where status in ('working', 'input_required'))::int as active,
      (select json_build_object('index', map_index, 'message', coalesce(error ->> 'message', status_message),
                                'failures', failures)
       from tasks where ${ofMap(map)} and status in ('failed', 'cancelled')
       order by map_index limit 1) as failed
    from tasks where ${ofMap(map)}`.execute(db);
  const row = rows[0]!;
  return {
    total: row.total,
    completed: row.completed,
    active: row.active,
    ...(row.failed !== null && {
      failed: {
        index: row.failed.index,
        message: row.failed.message ?? 'failed',
        failures: row.failed.failures,
      },
    }),
  };
}

/** The items' results, in index order (call once every item completed). */
export async function readMapResults(db: Kysely<Database>, map: MapRef): Promise<unknown[]> {
  const { rows } = await sql<{ result: { value?: unknown } | null }>`
    select result from tasks where ${ofMap(map)} order by map_index`.execute(db);
  return rows.map((r) => r.result?.value);
}

/** True once no item of the map is left to run. */
export async function mapSettled(db: Kysely<Database>, map: MapRef): Promise<boolean> {
  const { rows } = await sql<{ settled: boolean }>`
    select not exists (
      select 1 from tasks where ${ofMap(map)} and status in ('working', 'input_required')
    ) as settled`.execute(db);
  return rows[0]?.settled === true;
}

/**
 * Stops a map's unfinished items (its first failure fails it): one not held by a worker is cancelled
 * at once, a running one is told through its cancel flag. (A parent that ends stops all of its items:
 * a trigger does that, see the migration add_task_map_items.)
 */
export async function cancelMapItems(db: Kysely<Database>, map: MapRef): Promise<void> {
  const idle = sql<boolean>`(leased_by is null or lease_expires_at < now())`;
  await db
    .updateTable('tasks')
    .set({
      cancel_requested_at: sql`coalesce(cancel_requested_at, now())`,
      status: sql`case when ${idle} then 'cancelled' else status end`,
      status_message: sql`case when ${idle} then 'Cancelled by request' else status_message end`,
      lease_expires_at: sql`case when ${idle} then null else lease_expires_at end`,
      leased_by: sql`case when lease_expires_at < now() then null else leased_by end`,
      last_updated_at: sql`now()`,
    })
    .where(ofMap(map))
    .where('status', 'in', ACTIVE_STATUSES)
    .execute();
}

/** What became of one completed item: whether its fence held, and the turn it passed on. */
export interface ItemPassed {
  landed: boolean;
  /** The next item, claimed for the caller's worker (to run in the same slot). */
  next?: ClaimedTask | undefined;
  /** The next item, given a claim deadline: the caller enqueues its run in this transaction. */
  queued?: string | undefined;
}

/**
 * Completes items of one map with their functions' values (each fenced by its attempt; `cancelled`
 * instead where a cancel was asked for), ends their attempts (outcome: the item's new status) and, in
 * the same statement, hands each completed item's turn to
 * the next pending item while the parent still runs: claimed by `claimFor` (the same worker, to run in
 * the same slot), or given a claim deadline for the caller to enqueue (a worker that shuts down). A
 * worker's concurrent completions of a map go together (see map-item.ts): one statement for all.
 */
export async function completeMapItems(
  db: Kysely<Database>,
  map: MapRef,
  items: readonly { taskId: string; attempt: number; index: number; value: unknown }[],
  claimFor: { workerId: string; leaseMs: number } | undefined,
): Promise<ItemPassed[]> {
  // Items are dispatched in index order, so every pending item comes after every completing one: the
  // search for successors starts past them, not over the index entries of the items done before. (An
  // item left behind by a claim that failed after skipping it is dispatched by the parent's recheck.)
  const after = Math.max(...items.map((i) => i.index));
  const values = items.map((i) => ({
    task_id: i.taskId,
    attempt: i.attempt,
    value: i.value === undefined ? {} : { value: i.value },
  }));
  const turn =
    claimFor === undefined
      ? sql`lease_expires_at = ${claimDeadline()}`
      : sql`attempt = t.attempt + 1, leased_by = ${claimFor.workerId},
            lease_expires_at = now() + ${claimFor.leaseMs} * interval '1 millisecond'`;
  const columns = sql.join(CLAIMED_COLUMNS.map((c) => sql.raw(`t.${c}`)));
  const { rows } = await sql<{
    landed: string[] | null;
    turned: ClaimedJson[] | null;
  }>`
    with v as (
      select * from jsonb_to_recordset(${JSON.stringify(values)}::jsonb) as v(task_id text, attempt int, value jsonb)
    ), done as (
      update tasks t set
        status = case when t.cancel_requested_at is null then 'completed' else 'cancelled' end,
        result = case when t.cancel_requested_at is null then v.value end,
        status_message = case when t.cancel_requested_at is null then t.status_message else 'Cancelled by request' end,
        leased_by = null, lease_expires_at = null, last_updated_at = now()
      from v where t.task_id = v.task_id and t.attempt = v.attempt and t.status = 'working'
      returning t.task_id, t.attempt, t.status
    ), ended as (
      update task_attempts a set ended_at = now(), outcome = done.status
      from done where a.task_id = done.task_id and a.attempt = done.attempt
    ), next as (
      select c.task_id from tasks c
      where ${ofMap(map)} and ${PENDING} and c.map_index > ${after}::int
        and exists (select 1 from tasks p where p.task_id = ${map.parentTaskId}
                                            and p.status = 'working' and p.cancel_requested_at is null)
      order by c.map_index limit (select count(*) from done where status = 'completed')
      for update of c skip locked
    ), turned as (
      update tasks t set ${turn} from next where t.task_id = next.task_id
      returning ${columns}, t.leased_by
    ), recorded as (
      insert into task_attempts (task_id, attempt, worker_id, lease_expires_at)
      select task_id, attempt, leased_by, lease_expires_at from turned where leased_by is not null
    )
    select (select json_agg(task_id) from done) as landed,
           (select json_agg(row_to_json(turned)) from turned) as turned`.execute(db);
  const landed = new Set(rows[0]?.landed ?? []);
  const turned = rows[0]?.turned ?? [];
  return items.map((item) => {
    if (!landed.has(item.taskId)) return { landed: false };
    const row = turned.shift();
    if (row === undefined) return { landed: true };
    return claimFor === undefined
      ? { landed: true, queued: row.task_id }
      : { landed: true, next: claimedFromJson(row) };
  });
}

/** A waiting parent's statusMessage: how far its map has come. */
export const mapProgress = (mapName: string, completed: number, total: number) =>
  `${mapName}: ${completed}/${total} items`;

/** Writes a parent's progress (mapProgress) while it waits for its items. */
export async function setMapProgress(db: Kysely<Database>, map: MapRef): Promise<void> {
  const { completed, total } = await readMapState(db, map);
  const message = mapProgress(map.mapName, completed, total);
  await db
    .updateTable('tasks')
    .set({ status_message: message, last_updated_at: sql`now()` })
    .where('task_id', '=', map.parentTaskId)
    .where('status', '=', 'working')
    .where('status_message', 'is distinct from', message)
    .execute();
}
