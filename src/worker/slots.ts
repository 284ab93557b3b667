/**
 * How many task legs this worker runs at once, and when its fetch loop looks at the queue.
 *
 * A slot is taken for each delivery fetched from the queue, and for each task a create starts here (see
 * `startHere` in pool.ts); it is given back when what it holds ends (slot-work.ts): the task's leg and
 * the legs it hands on, or the settling of a delivery that was not claimed. The loop looks at the queue
 * at once when poked (a NOTIFY for a new run, a freed slot while runs wait, a scheduled wake-up) and
 * otherwise after its idle interval, the backstop for a lost wake-up.
 */
export class Slots {
  readonly concurrency: number;
  /**
   * The last slots, kept for light principals (fair share): only runs whose principal holds fewer active
   * tasks than there are reserved slots take them, so that a principal who fills the others (32 long
   * legs) cannot keep everyone else waiting. None when the pool has one slot.
   */
  readonly reserved: number;
  #active = 0;
  /**
   * Runs may be waiting in the queue. Cleared by a fetch that found fewer than it could take (unless a
   * notice came while it ran), set by a NOTIFY, a resync, a scheduled wake-up or the backstop timer. A
   * freed slot fetches only while it is set: without it, a worker would poll an empty queue after every
   * task it ran.
   */
  runsWaiting = true;
  #notices = 0;
  #poked = false;
  #stopping = false;
  #wake: () => void = () => {};

  constructor(concurrency: number, reserved = defaultReserved(concurrency)) {
    this.concurrency = concurrency;
    this.reserved = Math.min(Math.max(0, reserved), concurrency - 1);
  }

  /** Free slots any run may take (the others are reserved for light principals). */
  get freeForAny(): number {
    return Math.max(0, this.free - this.reserved);
  }

  /** A principal holding `rank` active tasks is light: it may take a reserved slot. */
  isLight(rank: number): boolean {
    return rank < this.reserved;
  }

  get free(): number {
    return this.concurrency - this.#active;
  }
  get stopping(): boolean {
    return this.#stopping;
  }
  /** How many notices came so far: a fetch compares it before and after to know whether one came meanwhile. */
  get notices(): number {
    return this.#notices;
  }

  take(n = 1): void {
    this.#active += n;
  }

  /** Gives slots back; the loop fetches again if runs may be waiting. */
  release(n = 1): void {
    this.#active -= n;
    if (this.runsWaiting) this.#poke();
  }

  /** Runs were (or may have been) enqueued: look at the queue now. */
  notice(): void {
    this.#notices++;
    this.runsWaiting = true;
    this.#poke();
  }

  /** Starts a round of the loop: pokes from here on wake the next idle wait. */
  beginRound(): void {
    this.#poked = false;
  }

  /** Waits until poked (false) or for `ms` (true: the time ran out). */
  idle(ms: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      if (this.#poked || this.#stopping) return resolve(false);
      const timer = setTimeout(() => resolve(true), ms);
      this.#wake = () => {
        clearTimeout(timer);
        resolve(false);
      };
    });
  }

  /** No more fetching: the loop ends at its next turn. */
  stop(): void {
    this.#stopping = true;
    this.#wake();
  }

  #poke(): void {
    this.#poked = true;
    this.#wake();
  }
}

/** An eighth of the slots (at least one, none of a single slot). */
export function defaultReserved(concurrency: number): number {
  return concurrency > 1 ? Math.max(1, Math.floor(concurrency / 8)) : 0;
}
