// ctx.callTool, ctx.spawn, ctx.join and ctx.joinFirst in a task's attempt. A spawn is a step whose value
// is the child's task id (store/children.ts creates the child once per parent and name, so a worker
// that died before the checkpoint finds the same child); a join reads the children and, once they give
// what it waits for, checkpoints that (a step), else parks the task until a child's end wakes it.
import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import type { CallToolResult, JsonObject } from '../core/wire.ts';
import {
  assertStorableArguments,
  InvalidToolArgumentsError,
  parseToolArguments,
  toolTaskOf,
  type TaskDefaults,
} from '../launch/tool-task.ts';
import type { TaskQueue } from '../queue/task-queue.ts';
import {
  readChildren,
  spawnChild,
  type ChildLimits,
  type ChildState,
  type JoinMode,
} from '../tasks/store/children.ts';
import type { ClaimedTask } from '../tasks/store/lease.ts';
import type { StepHistory } from '../tasks/store/steps.ts';
import { ChildTaskFailedError, type ChildHandle, type ChildOptions } from '../tools/children.ts';
import type { ContextBackend } from '../tools/context.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import { NonRetryableError } from '../tools/retry.ts';
import type { AttemptStatus } from './attempt-status.ts';
import { infra, Park } from './leg-stops.ts';

/**
 * A task waiting for its children looks again this often. A child's end wakes it at once; this is the
 * backstop for a wake-up lost to a crash, or a child that ended where no worker saw it (expired).
 */
export const CHILD_RECHECK_MS = 60_000;

/** What children of a task are made with: the server's tools, defaults and limits. */
export interface ChildrenSettings {
  tools: ToolRegistry;
  limits: ChildLimits;
  /** TASK_TTL_MS and TASK_POLL_INTERVAL_MS, where a child's tool sets none. */
  taskDefaults: TaskDefaults;
  /** MAX_ARGUMENTS_BYTES: a child's arguments are held to a client's limit. */
  maxArgumentsBytes: number;
}

export interface AttemptChildrenOptions {
  db: Kysely<Database>;
  task: ClaimedTask;
  queue: TaskQueue;
  steps: StepHistory;
  signal: AbortSignal;
  step: ContextBackend['step'];
  status: AttemptStatus;
  children: ChildrenSettings;
  /** A map item's leg: a join its parent never saw end is a ReplayMissError (the step's), not a park. */
  replayOnly: boolean;
}

/** How a child ended, as a join records it. */
interface ChildEnd {
  taskId: string;
  toolName: string;
  status: string;
  result?: CallToolResult;
  error?: { code: number; message: string };
  message?: string;
}

/** A join's checkpoint: every result, a failure, or (joinFirst) the child that ended first. */
type JoinRecord = { results: CallToolResult[] } | { failed: ChildEnd } | { first: number; end: ChildEnd };

/** The step under which a spawn records its child. */
export const spawnStepName = (name: string) => `child:${name}`;

/** The step under which a join records what it got (the children's names, or their digest when long). */
function joinStepName(mode: JoinMode, handles: readonly ChildHandle[]): string {
  const names = handles.map((h) => h.name).join(',');
  const named = names.length <= 200 ? names : createHash('sha256').update(names).digest('base64url');
  return `join${mode === 'first' ? '-first' : ''}:${named}`;
}

/** `ctx.callTool`, `ctx.spawn`, `ctx.join` and `ctx.joinFirst` of one attempt. */
export function createAttemptChildren(
  opts: AttemptChildrenOptions,
): Pick<ContextBackend, 'callTool' | 'spawn' | 'join' | 'joinFirst'> {
  // The default names (`<tool>#<n>`) count this run's spawns of each tool.
  const spawned = new Map<string, number>();
  const spawn = async (toolName: string, args: JsonObject, options: ChildOptions = {}) => {
    const n = spawned.get(toolName) ?? 0;
    spawned.set(toolName, n + 1);
    const name = options.name ?? `${toolName}#${n}`;
    const { taskId } = await opts.step(spawnStepName(name), () =>
      createChild(opts, toolName, args, { name, detached: options.detached === true }),
    );
    return { taskId, name, toolName };
  };
  const join = async (handles: readonly ChildHandle[]) => {
    if (handles.length === 0) return [];
    const record = await settledJoin(opts, 'all', handles);
    if ('failed' in record) throw childFailure(record.failed);
    if (!('results' in record)) throw new Error('a join recorded what a joinFirst records');
    return record.results;
  };
  return {
    spawn,
    join,
    async callTool(toolName, args, options) {
      const [result] = await join([await spawn(toolName, args, options)]);
      return result!;
    },
    async joinFirst(handles) {
      if (handles.length === 0) throw new TypeError('ctx.joinFirst needs at least one child');
      const record = await settledJoin(opts, 'first', handles);
      if (!('first' in record)) throw new Error('a joinFirst recorded what a join records');
      if (record.end.status !== 'completed') throw childFailure(record.end);
      return { handle: handles[record.first]!, index: record.first, result: record.end.result! };
    },
  };
}

/** Creates the child task (the spawn step's body): a tool or arguments it cannot take fail the spawn. */
async function createChild(
  { db, task, queue, children }: AttemptChildrenOptions,
  toolName: string,
  args: JsonObject,
  spawn: { name: string; detached: boolean },
): Promise<{ taskId: string }> {
  if (!children.tools.has(toolName)) throw new NonRetryableError(`no tool named ${toolName} to start`);
  const tool = children.tools.get(toolName);
  let parsedArgs: unknown;
  try {
    parsedArgs = parseToolArguments(tool, args);
  } catch (err) {
    if (err instanceof InvalidToolArgumentsError) throw new NonRetryableError(err.message);
    throw err;
  }
  assertStorableArguments(args, task.clientCapabilities, children.maxArgumentsBytes);
  const child = toolTaskOf(tool, args, {
    principal: task.principal,
    defaults: children.taskDefaults,
    parsedArgs,
    clientCapabilities: task.clientCapabilities,
    traceContext: task.traceContext ?? undefined,
  });
  const created = await spawnChild(db, queue, task, { ...child, ...spawn }, children.limits).catch(infra);
  if ('refused' in created) {
    const { setting, limit } = created.refused;
    throw new NonRetryableError(
      setting === 'MAX_CHILD_DEPTH'
        ? `child task ${spawn.name} refused: it would nest deeper than MAX_CHILD_DEPTH (${limit})`
        : `child task ${spawn.name} refused: this task started MAX_CHILDREN_PER_TASK (${limit}) children already`,
    );
  }
  return created;
}

/**
 * What the join got: recorded once the children give what it waits for (a replay returns the record,
 * whatever became of the children since); until then the task parks, saying how many ended.
 */
async function settledJoin(
  opts: AttemptChildrenOptions,
  mode: JoinMode,
  handles: readonly ChildHandle[],
): Promise<JoinRecord> {
  const name = joinStepName(mode, handles);
  if (opts.steps.values.has(name) || opts.replayOnly)
    return opts.step(name, () => undefined as unknown as JoinRecord);
  const ids = handles.map((h) => h.taskId);
  const states = new Map(
    (await readChildren(opts.db, opts.task.taskId, ids).catch(infra)).map((s) => [s.taskId, s]),
  );
  const ends = handles.map((h) => endOf(h, states.get(h.taskId)));
  const record = mode === 'all' ? allRecord(ends) : firstRecord(ends, states);
  const ended = ends.filter((e) => e !== undefined).length;
  const label = handles.length === 1 ? handles[0]!.name : 'children';
  if (record !== undefined) {
    // As a map's `n/n items`: the parked task's "Waiting for …" must not outlive the wait.
    opts.status.set(`${label}: ${ended}/${handles.length} children`);
    return opts.step(name, () => record);
  }
  opts.signal.throwIfAborted();
  await opts.status.flush();
  throw new Park(
    new Date(Date.now() + CHILD_RECHECK_MS),
    `Waiting for ${label}: ${ended}/${handles.length} children`,
    { children: ids, mode },
  );
}

/** A child's end, or undefined while it runs (one no longer stored ended as far as its parent knows). */
function endOf(handle: ChildHandle, state: ChildState | undefined): ChildEnd | undefined {
  if (state === undefined) {
    return {
      taskId: handle.taskId,
      toolName: handle.toolName,
      status: 'failed',
      message: 'no longer stored',
    };
  }
  const { taskId, toolName, status } = state;
  if (status === 'working' || status === 'input_required') return undefined;
  if (status === 'completed') {
    const { resultType: _, ...result } = (state.result ?? { content: [] }) as CallToolResult & {
      resultType?: string;
    };
    return { taskId, toolName, status, result: result };
  }
  const error = state.error as { code: number; message: string } | null;
  return {
    taskId,
    toolName,
    status,
    ...(error !== null && { error: { code: error.code, message: error.message } }),
    message: error?.message ?? state.statusMessage ?? status,
  };
}

/** Every child completed; or the first (in the handles' order) that did not; else undefined. */
function allRecord(ends: readonly (ChildEnd | undefined)[]): JoinRecord | undefined {
  const failed = ends.find((e) => e !== undefined && e.status !== 'completed');
  if (failed !== undefined) return { failed };
  if (ends.some((e) => e === undefined)) return undefined;
  return { results: ends.map((e) => e!.result!) };
}

/** The child that ended first (by its last change, then its place in the handles), or undefined. */
function firstRecord(
  ends: readonly (ChildEnd | undefined)[],
  states: Map<string, ChildState>,
): JoinRecord | undefined {
  let first: number | undefined;
  const at = (i: number) => states.get(ends[i]!.taskId)?.lastUpdatedAt ?? '';
  ends.forEach((end, i) => {
    if (end !== undefined && (first === undefined || at(i) < at(first))) first = i;
  });
  return first === undefined ? undefined : { first, end: ends[first]! };
}

function childFailure(end: ChildEnd): ChildTaskFailedError {
  const status = end.status === 'cancelled' ? 'cancelled' : 'failed';
  return new ChildTaskFailedError(end.taskId, end.toolName, status, end.error, end.message ?? status);
}
