import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { ClientCapabilities, JsonObject } from '../../core/wire.ts';
import type { TraceCarrier } from '../../core/tracing.ts';
import { claimDeadline } from './lease.ts';
import { TASK_VIEW_COLUMNS, toTaskView, type TaskView } from './view.ts';

export interface NewTask {
  taskId: string;
  principal: string;
  toolName: string;
  arguments: JsonObject;
  prepared: unknown;
  clientCapabilities: ClientCapabilities;
  ttlMs: number | null;
  pollIntervalMs: number;
  /** The 2025-11-25 session creating the task, if any. */
  sessionId?: string | undefined;
  /** The creating request's trace context: every run leg continues it. */
  traceContext?: TraceCarrier | undefined;
}

/** Inserts a task in `working`; run it in the transaction that also enqueues its job. */
export async function insertTask(db: Kysely<Database>, task: NewTask): Promise<TaskView> {
  const row = await db
    .insertInto('tasks')
    .values({
      task_id: task.taskId,
      principal: task.principal,
      tool_name: task.toolName,
      arguments: JSON.stringify(task.arguments),
      prepared: task.prepared === undefined ? null : JSON.stringify(task.prepared),
      client_capabilities: JSON.stringify(task.clientCapabilities),
      session_id: task.sessionId ?? null,
      trace_context: task.traceContext === undefined ? null : JSON.stringify(task.traceContext),
      status: 'working',
      ttl_ms: task.ttlMs,
      poll_interval_ms: task.pollIntervalMs,
      lease_expires_at: claimDeadline(),
      // now() is the transaction's start, the same instant created_at defaults to.
      expires_at: task.ttlMs === null ? null : sql<Date>`now() + ${task.ttlMs} * interval '1 millisecond'`,
    })
    .returning(TASK_VIEW_COLUMNS)
    .executeTakeFirstOrThrow();
  return toTaskView(row);
}
