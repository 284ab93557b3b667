import { QuotaExceededError } from './errors.ts';

/**
 * How many of one kind of long-lived thing (an open stream, a waiting request) each principal holds on
 * this instance, capped at `max`: `take` refuses with QuotaExceededError naming the setting.
 *
 * Per instance by design: such a thing costs a socket and a little memory of the instance that holds it,
 * and no reads of its own (a task change is read once per process, whatever the number of streams:
 * src/tasks/changes.ts). The cap bounds what one principal takes from one instance; behind a load
 * balancer, N instances allow N × max.
 */
export class PerPrincipalCap {
  private readonly held = new Map<string, number>();

  constructor(
    /** The setting that sets `max`, named in the refusal. */
    readonly setting: string,
    readonly max: number,
    /** What is counted, as the refusal says it: "Too many {what}". */
    private readonly what: string,
  ) {}

  /** One more for `principal`, or QuotaExceededError. The release gives it back once, however often called. */
  take(principal: string): () => void {
    const count = this.heldBy(principal);
    if (count >= this.max) {
      throw new QuotaExceededError(this.setting, this.max, `Too many ${this.what}`);
    }
    this.held.set(principal, count + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = this.heldBy(principal) - 1;
      if (left > 0) this.held.set(principal, left);
      else this.held.delete(principal);
    };
  }

  heldBy(principal: string): number {
    return this.held.get(principal) ?? 0;
  }
}
