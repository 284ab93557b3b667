// The determinism guard: a run of the handler must ask for the steps its task recorded, in the same order;
// code that no longer does fails its task (NonDeterminismError) instead of replaying another step's value.
import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import type { StepHistory } from '../tasks/store/steps.ts';

/** Code that no longer matches what a running task recorded: the task fails at once with this. */
export class NonDeterminismError extends ProtocolError {
  constructor(message: string) {
    super(ProtocolErrorCode.InternalError, message);
  }
}

/** A task asked for more steps than MAX_STEPS_PER_TASK: it fails at once with this (storage is bounded). */
export class StepLimitError extends NonDeterminismError {
  constructor(readonly maxSteps: number) {
    super(
      `the task asked for more than ${maxSteps} steps (MAX_STEPS_PER_TASK): make each step do more, or fan out with ctx.map`,
    );
  }
}

/**
 * A map item's replay of its parent's handler reached something the parent never recorded: the code
 * before the map changed, or the item's function used `ctx` (it may not).
 */
export class ReplayMissError extends NonDeterminismError {
  constructor(what: string) {
    super(
      `a map item's replay reached ${what}, which its task never recorded before the map: the tool's code changed, or the map's function uses ctx (it may not)`,
    );
  }
}

/**
 * The determinism guard: each step call of a run of the handler takes the next position (0, 1, 2, …).
 * A name used twice in one run is refused (a loop must number its steps); a name that differs from the
 * one recorded at its position means the tool's code changed under the task, and fails it instead of
 * handing back another step's value.
 */
export function stepGuard(history: StepHistory, maxSteps: number) {
  const seen = new Set<string>();
  let position = 0;
  return {
    next(name: string): number {
      if (position >= maxSteps) throw new StepLimitError(maxSteps);
      if (seen.has(name)) {
        throw new NonDeterminismError(
          `step "${name}" was called twice in one run of the handler: step names must be unique within a task (in a loop, number them: \`${name}-\${i}\`)`,
        );
      }
      seen.add(name);
      const recorded = history.positions.get(position);
      if (recorded !== undefined && recorded !== name) {
        throw new NonDeterminismError(
          `the handler asked for step "${name}" as step #${position + 1}, where this task recorded "${recorded}": the tool's code changed under a running task (guard new code with ctx.patched)`,
        );
      }
      return position++;
    },
    /** The position the next step will take (events emitted between steps are keyed by it). */
    upcoming(): number {
      return position;
    },
    /** Whether this run is still replaying steps recorded without the patch marker `name` at this position. */
    replayingOldCode(name: string): boolean {
      const recorded = history.positions.get(position);
      return recorded !== undefined && recorded !== name;
    },
  };
}
