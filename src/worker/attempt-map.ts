// ctx.map in a task's attempt. In the task's own legs it inserts the items as child tasks, dispatches
// the first `concurrency` of them to the queue and parks until they are done (store/maps.ts keeps the
// bound and wakes it). In an item's leg (on any worker) the handler replays from the parent's
// checkpoints up to the same call, which runs the item's function and ends the replay (MapItemDone).
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import type { TaskQueue } from '../queue/task-queue.ts';
import type { ClaimedTask } from '../tasks/store/lease.ts';
import {
  cancelMapItems,
  dispatchMapItems,
  insertMapItems,
  mapProgress,
  readMapResults,
  readMapState,
  type MapRef,
} from '../tasks/store/maps.ts';
import {
  callStep,
  MAP_CONCURRENCY,
  MAX_MAP_ITEMS,
  StepFailedError,
  type MapItemFn,
  type MapOptions,
  type StepFn,
  type StepOptions,
} from '../tools/retry.ts';
import { NonDeterminismError } from './step-guard.ts';
import { infra, MapItemDone, Park } from './leg-stops.ts';

/** The step under which a map records its number of items (its position is checked like a step's). */
export const mapStepName = (name: string) => `map:${name}`;

/**
 * A task waiting for its map's items looks again this often. Its last item wakes it at once; this is
 * the backstop for a wake-up lost to a crash, and it tops the dispatched items up to `concurrency`.
 */
export const MAP_RECHECK_MS = 60_000;

/** What an item's leg runs: the map's name and the item's index; the map's options once replayed to it. */
export interface MapItemLeg {
  mapName: string;
  index: number;
  /** This run of the item, from 1 (1 + its failures so far). */
  attempt: number;
  options?: MapOptions | undefined;
}

export interface MapRunnerOptions {
  db: Kysely<Database>;
  /** The task whose handler calls the map (in an item's leg: the parent, read-only). */
  task: ClaimedTask;
  queue: TaskQueue;
  signal: AbortSignal;
  step: <T>(name: string, fn: StepFn<T>, options?: StepOptions) => Promise<T>;
  flushStatus: () => Promise<void>;
  /** The task's statusMessage (`<map>: n/n items` once the map is done). */
  status: (message: string) => void;
  /** Set in an item's leg. */
  item?: MapItemLeg | undefined;
}

/** `ctx.map` of one attempt: the parent's own, or the replay in an item's leg. */
export function createMapRunner(opts: MapRunnerOptions) {
  const map = <T, R>(name: string, items: readonly T[], fn: MapItemFn<T, R>, options?: MapOptions) =>
    opts.item === undefined
      ? mapInTask<T, R>(opts, name, items, options)
      : mapInItemLeg(opts, opts.item, name, items, fn, options);
  return { map };
}

/** The recorded size of the map, checked against this run's items (the determinism guard). */
async function checkRecordedSize(
  { step }: MapRunnerOptions,
  name: string,
  items: readonly unknown[],
): Promise<void> {
  if (!Array.isArray(items)) throw new TypeError(`ctx.map "${name}": items must be an array`);
  if (items.length > MAX_MAP_ITEMS) {
    throw new RangeError(`ctx.map "${name}": ${items.length} items, at most ${MAX_MAP_ITEMS}`);
  }
  const { items: count } = await step(mapStepName(name), () => ({ items: items.length }));
  if (count !== items.length) {
    throw new NonDeterminismError(
      `ctx.map "${name}" was called with ${items.length} items where this task recorded ${count}: the items must come from steps or deterministic code`,
    );
  }
}

/**
 * The map in its task's own leg: its results once every item is done, its first failure for good as the
 * map's failure; otherwise its items are inserted and dispatched (up to `concurrency`) and the task parks.
 */
async function mapInTask<T, R>(
  opts: MapRunnerOptions,
  name: string,
  items: readonly T[],
  options: MapOptions = {},
): Promise<R[]> {
  const { db, task } = opts;
  await checkRecordedSize(opts, name, items);
  if (items.length === 0) return [];
  const ref: MapRef = { parentTaskId: task.taskId, mapName: name };
  const state = await readMapState(db, ref).catch(infra);
  if (state.failed !== undefined) {
    await cancelMapItems(db, ref).catch(infra);
    const { index, failures, message } = state.failed;
    throw new StepFailedError(`${name}[${index}]`, failures + 1, new Error(message));
  }
  if (state.total === items.length && state.completed === state.total) {
    opts.status(mapProgress(name, state.completed, state.total));
    return (await readMapResults(db, ref).catch(infra)) as R[];
  }
  opts.signal.throwIfAborted();
  const concurrency = Math.min(
    Math.max(1, Math.floor(options.concurrency ?? MAP_CONCURRENCY.default)),
    MAP_CONCURRENCY.max,
  );
  await db
    .transaction()
    .execute(async (trx) => {
      if (state.total < items.length) await insertMapItems(trx, task, name, items.length);
      for (const id of await dispatchMapItems(trx, ref, concurrency)) await opts.queue.enqueueRun(trx, id);
    })
    .catch(infra);
  await opts.flushStatus();
  throw new Park(new Date(Date.now() + MAP_RECHECK_MS), mapProgress(name, state.completed, items.length), {
    map: name,
  });
}

/** The map in an item's leg: its own map runs this item's function and ends the replay (MapItemDone). */
async function mapInItemLeg<T, R>(
  opts: MapRunnerOptions,
  item: MapItemLeg,
  name: string,
  items: readonly T[],
  fn: MapItemFn<T, R>,
  options: MapOptions = {},
): Promise<R[]> {
  await checkRecordedSize(opts, name, items);
  if (name !== item.mapName) return otherMapInItemLeg<R>(opts, name, items.length);
  if (item.index >= items.length) {
    throw new NonDeterminismError(`ctx.map "${name}" has no item ${item.index} any more`);
  }
  item.options = options;
  const value = await callStep(
    `${name}[${item.index}]`,
    (signal) =>
      fn(items[item.index]!, item.index, signal, { map: name, index: item.index, attempt: item.attempt }),
    options.timeoutMs,
    opts.signal,
  );
  throw new MapItemDone(value);
}

/**
 * Another map of this handler, in an item's leg: one before this one finished before it was reached, and
 * returns its results; one beside it (Promise.all) is not this leg's business: it never returns, and this
 * item's replay ends at its own map.
 */
async function otherMapInItemLeg<R>(
  { db, task }: MapRunnerOptions,
  name: string,
  size: number,
): Promise<R[]> {
  const ref: MapRef = { parentTaskId: task.taskId, mapName: name };
  const state = await readMapState(db, ref).catch(infra);
  if (state.total === size && state.completed === state.total) {
    return (await readMapResults(db, ref).catch(infra)) as R[];
  }
  return new Promise<never>(() => {});
}
