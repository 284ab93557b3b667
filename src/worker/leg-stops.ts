// Leg stops: what ends a leg early, thrown through the handler (not "signals": a signal is a task's,
// from ctx.createSignal). The task waits (SuspendForInput; Park: for a time, a signal or a map's items),
// moves to another worker (HandBack), or the store failed under it. classify() (outcome.ts) reads them.
import { isConnectionError } from '../db/errors.ts';

/** Thrown by `input` once the task is parked in `input_required`: this leg of the job ends here. */
export class SuspendForInput extends Error {
  override readonly name = 'SuspendForInput';
  constructor(readonly taskId: string) {
    super('Task is waiting for input');
  }
}

/**
 * What a parked task waits for besides its time: a signal's delivery, a map's last item, a steering
 * message after the one numbered `steering`, or its children's ends (a join). Any may come while the parking attempt still holds the
 * task (its wake-up is then turned away), so the park looks once more before it lets go.
 */
export type ParkedOn =
  { signal: string } | { map: string } | { steering: number } | { children: string[]; mode: 'all' | 'first' };

/**
 * Thrown by `sleep`, `waitForSignal` and `map` once what they wait for is recorded: this leg ends, the
 * task stays `working` with `statusMessage`, and its next leg runs at `until` (or sooner, when a signal
 * is delivered or a map's items are done).
 */
export class Park extends Error {
  override readonly name = 'Park';
  constructor(
    readonly until: Date,
    readonly statusMessage: string,
    readonly parkedOn?: ParkedOn,
  ) {
    super(statusMessage);
  }
}

/**
 * Thrown by `map` in a map item's leg once the item's function returned: the handler's replay ends
 * there, and the leg stores `value` as the item's result.
 */
export class MapItemDone extends Error {
  override readonly name = 'MapItemDone';
  constructor(readonly value: unknown) {
    super('map item done');
  }
}

/** Thrown at a step boundary while the worker shuts down: the task is handed to another worker. */
export class HandBack extends Error {
  override readonly name = 'HandBack';
  constructor() {
    super('The worker is shutting down');
  }
}

/** A store operation failed (connection loss, failover…): not the handler's fault, no retry counted. */
export class InfrastructureError extends Error {
  override readonly name = 'InfrastructureError';
}

/** A lost connection during a store operation becomes InfrastructureError; anything else stays as it is. */
export function infra(err: unknown): never {
  if (!isConnectionError(err)) throw err;
  throw new InfrastructureError(err instanceof Error ? err.message : String(err), { cause: err });
}
