// A fork: a new task (new id) of the same principal, tool and arguments as a finished one, with the
// source's history before a chosen step copied, so that its first run replays those steps and runs the
// rest. A terminal task never changes (SEP-2663); this is how an operator redoes one (a backfill, an
// investigation). Copied: the steps before the fork step (artifacts they wrote come along, their links
// naming the new task), the input answers given before it, the signals those steps created as they
// were at the fork point (see copySignals), and the steering messages (see copySteering). Not copied: map items (a map before the fork step runs
// again), the result.
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { TaskQueue } from '../../queue/task-queue.ts';
import { TaskNotFoundError } from '../errors.ts';
import { isWellFormedTaskId, newTaskId } from '../ids.ts';
import { TERMINAL_STATUSES } from '../status.ts';
import { recordAction, type Actor } from './actions.ts';
import { claimDeadline } from './lease.ts';
import { newSignalToken, tokenHash, type SignalStepValue } from './signals.ts';
import { copySteering } from './steering.ts';
import { signalStepName } from './steps.ts';

/** What a signal's step name starts with (its signal's name follows). */
const SIGNAL_PREFIX = signalStepName('');

/** A fork refused: the source is still running, or has no step of that name. */
export class ForkRefusedError extends Error {
  override readonly name = 'ForkRefusedError';
}

/** A signal the fork waits for under a new token: whoever is to deliver it needs this token's URL. */
export interface ForkedSignal {
  name: string;
  token: string;
  timeoutAt: Date | null;
}

/** A fork: the new task, and the signals it waits for afresh (empty when none is pending). */
export interface Fork {
  taskId: string;
  signals: ForkedSignal[];
}

/**
 * Forks `sourceId` (a terminal task). `fromStep` is the first step that runs again (undefined: the
 * whole handler runs again, nothing copied). One transaction: the task, its copied rows, its first
 * run, and the action on both tasks.
 */
export async function forkTask(
  db: Kysely<Database>,
  queue: TaskQueue,
  sourceId: string,
  { fromStep }: { fromStep?: string | undefined },
  actor: Actor,
): Promise<Fork> {
  if (!isWellFormedTaskId(sourceId)) throw new TaskNotFoundError(sourceId.slice(0, 64));
  return db.transaction().execute(async (trx) => {
    const source = await trx
      .selectFrom('tasks')
      .select(['status', 'parent_task_id'])
      .where('task_id', '=', sourceId)
      .executeTakeFirst();
    if (source === undefined || source.parent_task_id !== null) throw new TaskNotFoundError(sourceId);
    if (!(TERMINAL_STATUSES as readonly string[]).includes(source.status)) {
      throw new ForkRefusedError(`task ${sourceId} is ${source.status}: only a finished task can be forked`);
    }
    const before = fromStep === undefined ? undefined : await forkPoint(trx, sourceId, fromStep);
    const taskId = newTaskId();
    await insertFork(trx, sourceId, taskId, before !== undefined);
    const signals = before === undefined ? [] : await copyHistory(trx, sourceId, taskId, before);
    // (Its copied steering reads replay; its later ones read on from the source's messages.)
    if (before !== undefined) await copySteering(trx, sourceId, taskId);
    await queue.enqueueRun(trx, taskId);
    const detail = { ...(fromStep !== undefined && { fromStep }) };
    await recordAction(trx, [sourceId], actor, 'fork', { ...detail, newTaskId: taskId });
    await recordAction(trx, [taskId], actor, 'forked', { ...detail, sourceTaskId: sourceId });
    return { taskId, signals };
  });
}

/** Where the fork step sits in the source's run: its position (and when it was recorded). */
interface ForkPoint {
  position: number;
  at: Date;
}

async function forkPoint(db: Kysely<Database>, sourceId: string, fromStep: string): Promise<ForkPoint> {
  const step = await db
    .selectFrom('task_steps')
    .select(['position', 'created_at'])
    .where('task_id', '=', sourceId)
    .where('name', '=', fromStep)
    .executeTakeFirst();
  if (step === undefined || step.position === null) {
    const names = await db
      .selectFrom('task_steps')
      .select('name')
      .where('task_id', '=', sourceId)
      .orderBy('position')
      .limit(20)
      .execute();
    const known = names.map((n) => n.name).join(', ');
    throw new ForkRefusedError(
      `task ${sourceId} has no step "${fromStep}"${known === '' ? ' (it has no steps)' : `; its steps: ${known}`}`,
    );
  }
  return { position: step.position, at: step.created_at };
}

/**
 * The new task: the source's principal, tool, arguments and settings, `working`, a run to be queued.
 * With copied history its first run is attempt 2: a worker reads no history for an attempt 1 (a new
 * task has none), and the copied steps count as the fork's attempt 1.
 */
async function insertFork(
  db: Kysely<Database>,
  sourceId: string,
  taskId: string,
  withHistory: boolean,
): Promise<void> {
  await sql`
    insert into tasks (task_id, principal, tool_name, arguments, prepared, client_capabilities,
      tool_error_fails, status, status_message, ttl_ms, poll_interval_ms, expires_at, lease_expires_at,
      concurrency_key, concurrency_limit, rate_key, rate_limit, rate_per_ms, timeout_ms, deadline_at,
      secret_arguments, attempt)
    select ${taskId}, principal, tool_name, arguments, prepared, client_capabilities, tool_error_fails,
      'working', ${`Forked from ${sourceId}`}, ttl_ms, poll_interval_ms,
      case when ttl_ms is null then null else now() + ttl_ms * interval '1 millisecond' end, ${claimDeadline()},
      concurrency_key, concurrency_limit, rate_key, rate_limit, rate_per_ms, timeout_ms,
      -- A fork is a new task: its timeoutMs counts from now, as its TTL does.
      case when timeout_ms is null then null else now() + timeout_ms * interval '1 millisecond' end,
      secret_arguments, ${withHistory ? 1 : 0}
    from tasks where task_id = ${sourceId}`.execute(db);
}

/**
 * Copies the steps before the fork point (with their artifacts, and their signals: see copySignals)
 * and the inputs answered before it; the signals the fork waits for afresh.
 */
async function copyHistory(
  db: Kysely<Database>,
  sourceId: string,
  taskId: string,
  point: ForkPoint,
): Promise<ForkedSignal[]> {
  // Steps: a step's output names its task only in an artifact's link (uri, download URL).
  await sql`
    insert into task_steps (task_id, name, output, attempt, position, created_at)
    select ${taskId}, name,
      case when name like 'artifact:%' then replace(output::text, ${sourceId}, ${taskId})::jsonb else output end,
      1, position, created_at
    from task_steps
    where task_id = ${sourceId} and position < ${point.position} and name not like 'map:%'`.execute(db);
  await sql`
    with source as (
      select a.*, gen_random_uuid() as new_id from task_artifacts a
      where a.task_id = ${sourceId} and a.state = 'complete'
        and exists (select 1 from task_steps s where s.task_id = ${taskId} and s.name = 'artifact:' || a.name)
    ), copied as (
      insert into task_artifacts (artifact_id, task_id, name, mime_type, attempt, state, chunk_size, size,
        chunks, sha256, created_at, completed_at)
      select new_id, ${taskId}, name, mime_type, 1, state, chunk_size, size, chunks, sha256, created_at,
        completed_at
      from source
    )
    insert into task_artifact_chunks (artifact_id, seq, data)
    select s.new_id, c.seq, c.data from source s join task_artifact_chunks c on c.artifact_id = s.artifact_id`.execute(
    db,
  );
  await sql`
    insert into task_input_requests (task_id, key, request, response, created_at, answered_at)
    select ${taskId}, key, request, response, created_at, answered_at
    from task_input_requests
    where task_id = ${sourceId} and answered_at is not null and created_at < ${point.at}`.execute(db);
  return copySignals(db, sourceId, taskId, point);
}

/** A copied signal step's signal in the source, as it stood at the fork point. */
interface SourceSignal {
  name: string;
  state: 'delivered' | 'timed_out' | 'pending';
  /** For a pending one: its timeout's length (from its step), null for none. */
  timeout_ms: number | null;
}

/**
 * The signals of the copied `signal:<name>` steps, each under a new token (the source's token must never
 * reach the fork; the token in its copied step is rewritten to match), in the state it had at the fork
 * point: delivered before it (payload kept: the fork's wait replays it), timed out before it (so
 * again), or else pending: the fork waits for it anew, with a timeout as long as the source's counted
 * from the fork. The pending ones are returned: their new tokens are nowhere else to be seen (the step
 * that sent the source's URL out may be among the copied ones).
 */
async function copySignals(
  db: Kysely<Database>,
  sourceId: string,
  taskId: string,
  point: ForkPoint,
): Promise<ForkedSignal[]> {
  const { rows: found } = await sql<SourceSignal>`
    select substr(s.name, ${SIGNAL_PREFIX.length + 1}) as name,
      case when g.delivered_at < ${point.at} then 'delivered'
           when g.timeout_at < ${point.at} then 'timed_out' else 'pending' end as state,
      (extract(epoch from g.timeout_at - s.created_at) * 1000)::float8 as timeout_ms
    from task_steps s
    left join task_signals g on g.task_id = ${sourceId} and g.name = substr(s.name, ${SIGNAL_PREFIX.length + 1})
    where s.task_id = ${taskId} and s.name like ${`${SIGNAL_PREFIX}%`}`.execute(db);
  if (found.length === 0) return [];
  const signals = found.map((f) => ({ ...f, token: newSignalToken() }));
  const rows = signals.map((f) => ({
    name: f.name,
    state: f.state,
    timeout_ms: f.timeout_ms,
    hash: tokenHash(f.token),
  }));
  const { rows: inserted } = await sql<{ name: string; timeout_at: Date | null }>`
    insert into task_signals (task_id, name, token_hash, created_at, timeout_at, delivered_at, payload)
    select ${taskId}, v.name, v.hash, case when v.state = 'pending' then now() else g.created_at end,
      case when v.state <> 'pending' then g.timeout_at
           when v.timeout_ms is not null then now() + greatest(v.timeout_ms, 0) * interval '1 millisecond' end,
      case when v.state = 'delivered' then g.delivered_at end,
      case when v.state = 'delivered' then g.payload end
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      as v(name text, state text, timeout_ms float8, hash text)
    left join task_signals g on g.task_id = ${sourceId} and g.name = v.name
    returning name, timeout_at`.execute(db);
  const timeouts = new Map(inserted.map((r) => [r.name, r.timeout_at]));
  const handles = signals.map((f) => ({ ...f, timeoutAt: timeouts.get(f.name) ?? null }));
  // The copied step's handle (ctx.createSignal replays it) names the fork's token.
  const outputs = handles.map((h) => ({
    name: `${SIGNAL_PREFIX}${h.name}`,
    output: {
      value: { token: h.token, timeoutAt: h.timeoutAt?.toISOString() ?? null } satisfies SignalStepValue,
    },
  }));
  await sql`
    update task_steps s set output = v.output
    from jsonb_to_recordset(${JSON.stringify(outputs)}::jsonb) as v(name text, output jsonb)
    where s.task_id = ${taskId} and s.name = v.name`.execute(db);
  return handles
    .filter((h) => h.state === 'pending')
    .map(({ name, token, timeoutAt }) => ({ name, token, timeoutAt }));
}
