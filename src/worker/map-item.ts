// A map item's leg (ctx.map): it replays the parent's handler from the parent's checkpoints up to the
// map and runs one item's function (attempt-map.ts); here is what it replays from, and what becomes of
// the item afterwards: its turn passes to the next pending item in this same slot, or the parent wakes.
import type { WrittenEvents } from '../tasks/store/events.ts';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import { coerceError, type Logger } from '../log.ts';
import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import { loadInputs } from '../tasks/store/input.ts';
import { claimTask } from '../tasks/store/claim.ts';
import { CLAIMED_COLUMNS, toClaimedTask, type ClaimedTask, type MapItemRef } from '../tasks/store/lease.ts';
import { coalesce } from '../core/coalesce.ts';
import {
  completeMapItems,
  mapSettled,
  setMapProgress,
  type ItemPassed,
  type MapRef,
} from '../tasks/store/maps.ts';
import { loadStepHistory, type StepHistory } from '../tasks/store/steps.ts';
import type { TaskQueue } from '../queue/task-queue.ts';
import type { LegOutcome } from './outcome.ts';

/** What an item's end needs of its leg's worker (a part of LegDeps). */
export interface MapItemDeps {
  db: Kysely<Database>;
  queue: TaskQueue;
  workerId: string;
  leaseMs: number;
  draining: () => boolean;
  maps: MapItemCache;
  log: Logger;
}

/** An item whose function returned: its value, fenced by its attempt. */
interface CompletedItem {
  taskId: string;
  attempt: number;
  index: number;
  value: unknown;
}

/**
 * What a leg replays its handler from: the task's checkpoints and answered input (a map item's leg: its
 * parent's, as they were when its map began; read-only).
 */
export interface ReplaySource {
  task: ClaimedTask;
  steps: StepHistory;
  inputs: Map<string, { request: unknown; response: unknown }>;
  /** The events the task's earlier legs wrote (a map item's replay writes none: absent). */
  written?: WrittenEvents | undefined;
}

/** A parent is read again after this long (its checkpoints do not change while its map runs). */
const REPLAY_KEPT_MS = 30_000;
/** The maps a worker keeps what it knows of (the least recently used is forgotten first). */
const MAPS_KEPT = 64;
/** A parent's progress ("k/n items") is written at most this often by each worker. */
const PROGRESS_EVERY_MS = 1_000;
/**
 * A worker's completion statements of one map in flight at once: more than the task writes' 2, since an
 * item's slot waits for its statement before it runs the next item (measured on a 10,000-item map, 32
 * at a time: 2 → ~2,400 items/s, 8 → ~3,000, 16 no better).
 */
const MAX_IN_FLIGHT = 8;

/** What a worker keeps of one map: its parent to replay, when it last wrote progress, its batched completions. */
interface KeptMap {
  replay?: { at: number; source: Promise<ReplaySource | undefined> };
  progressAt: number;
  complete: (item: CompletedItem) => Promise<ItemPassed>;
}

/**
 * Each worker reads a map's parent once, not once per item, batches its items' completions, and writes
 * its progress now and then. A replay that finds a step missing from its copy reads the parent again
 * before it fails (`fresh`).
 */
export class MapItemCache {
  readonly #db: Kysely<Database>;
  readonly #claimFor: { workerId: string; leaseMs: number };
  readonly #maps = new Map<string, KeptMap>();

  /** `claimFor`: the worker that claims each completed item's successor. */
  constructor(db: Kysely<Database>, claimFor: { workerId: string; leaseMs: number }) {
    this.#db = db;
    this.#claimFor = claimFor;
  }

  /**
   * Completes an item and claims its successor for this worker (completeMapItems): the concurrent
   * completions of one map in this worker go to Postgres together, one statement for all.
   */
  complete(map: MapRef, item: CompletedItem): Promise<ItemPassed> {
    return this.#kept(map).complete(item);
  }

  /** The parent to replay (undefined when it no longer runs), and whether it came from the cache. */
  async parent(
    ref: MapItemRef,
    fresh: boolean,
  ): Promise<{ replay: ReplaySource | undefined; cached: boolean }> {
    const kept = this.#kept(ref);
    if (!fresh && kept.replay !== undefined && Date.now() - kept.replay.at < REPLAY_KEPT_MS) {
      return { replay: await kept.replay.source, cached: true };
    }
    const replay = { at: Date.now(), source: loadParent(this.#db, ref.parentTaskId) };
    kept.replay = replay;
    replay.source.catch(() => {
      if (kept.replay === replay) kept.replay = undefined;
    });
    return { replay: await replay.source, cached: false };
  }

  /** True when this worker should write the map's progress now. */
  progressDue(map: MapRef): boolean {
    const kept = this.#kept(map);
    if (Date.now() - kept.progressAt < PROGRESS_EVERY_MS) return false;
    kept.progressAt = Date.now();
    return true;
  }

  #kept({ parentTaskId, mapName }: MapRef): KeptMap {
    const key = `${parentTaskId}/${mapName}`;
    let kept = this.#maps.get(key);
    if (kept === undefined) {
      const map = { parentTaskId, mapName };
      kept = {
        progressAt: 0,
        complete: coalesce(
          (items: CompletedItem[]) => completeMapItems(this.#db, map, items, this.#claimFor),
          async (one: CompletedItem) => (await completeMapItems(this.#db, map, [one], this.#claimFor))[0]!,
          { maxInFlight: MAX_IN_FLIGHT },
        ),
      };
      if (this.#maps.size >= MAPS_KEPT) this.#maps.delete(this.#maps.keys().next().value!);
    } else this.#maps.delete(key);
    this.#maps.set(key, kept); // (last: the most recently used)
    return kept;
  }
}

async function loadParent(db: Kysely<Database>, parentTaskId: string): Promise<ReplaySource | undefined> {
  const [row, steps, inputs] = await Promise.all([
    db
      .selectFrom('tasks')
      .select([...CLAIMED_COLUMNS])
      .where('task_id', '=', parentTaskId)
      .where('status', '=', 'working')
      .executeTakeFirst(),
    loadStepHistory(db, parentTaskId),
    loadInputs(db, parentTaskId),
  ]);
  return row === undefined ? undefined : { task: toClaimedTask(row), steps, inputs };
}

/**
 * An item that failed for good fails with its function's own message (the parent's map reports it),
 * not the generic "Internal error" of a task.
 */
export function itemFailure(outcome: LegOutcome): LegOutcome {
  if (outcome.kind !== 'failed' || outcome.crash === undefined) return outcome;
  const message = outcome.crash.message.slice(0, 1_000);
  return { ...outcome, error: new ProtocolError(ProtocolErrorCode.InternalError, message) };
}

/**
 * Stores a finished item's value and passes its turn on: to the next pending item, claimed by this
 * worker to run in this slot (or enqueued, while the worker shuts down); with none left, to the parent
 * once every item is done. Returns the leg this slot runs next.
 */
export async function completeItem(
  deps: MapItemDeps,
  task: ClaimedTask,
  value: unknown,
): Promise<ClaimedTask | undefined> {
  const ref = task.mapItem!;
  const map = { parentTaskId: ref.parentTaskId, mapName: ref.mapName };
  const item = { taskId: task.taskId, attempt: task.attempt, index: ref.index, value };
  const passed = deps.draining()
    ? await deps.db.transaction().execute(async (trx) => {
        const [done] = await completeMapItems(trx, map, [item], undefined);
        if (done!.queued !== undefined) await deps.queue.enqueueRun(trx, done!.queued);
        return done!;
      })
    : await deps.maps.complete(map, item);
  if (!passed.landed) return undefined;
  if (deps.maps.progressDue(map)) {
    await setMapProgress(deps.db, map).catch((err: unknown) =>
      deps.log.warn('map progress write failed', { error: coerceError(err).message }),
    );
  }
  if (passed.next !== undefined || passed.queued !== undefined) return passed.next;
  return (await mapSettled(deps.db, map)) ? wakeParent(deps, map) : undefined;
}

/**
 * Runs the map's parent again (it reads its items' results, or the first failure): claimed here to run
 * in this slot, or enqueued while the worker shuts down. Undefined when the parent's own attempt still
 * holds it (it looks once more as it parks) or it no longer runs.
 */
export async function wakeParent(deps: MapItemDeps, map: MapRef): Promise<ClaimedTask | undefined> {
  if (deps.draining()) {
    await deps.db.transaction().execute((trx) => deps.queue.enqueueRun(trx, map.parentTaskId));
    return undefined;
  }
  return claimTask(deps.db, map.parentTaskId, deps.workerId, deps.leaseMs);
}
