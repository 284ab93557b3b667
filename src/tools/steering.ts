// Steering (SEP-2669 draft, experimental): messages a task's requestor sends to it while it runs
// (`tasks/steer`), which its handler reads durably through `ctx.steering`.

/** A message the task's requestor sent with `tasks/steer`, as the handler reads it. */
export interface SteeringMessage {
  /** Its number within the task, from 1, in the order the messages were sent. */
  readonly seq: number;
  /** The text, as sent (at most MAX_STEERING_MESSAGE_BYTES). */
  readonly message: string;
  readonly sentAt: Date;
}

/** How long `ctx.steering.next` waits, and what the task's requestor reads meanwhile. */
export interface SteeringWaitOptions {
  /**
   * How long to wait for a message: 0 looks once and does not wait; unset waits until one comes (the
   * task's TTL bounds it).
   */
  timeoutMs?: number;
  /** The task's statusMessage while it waits (default "Waiting for a steering message"). */
  statusMessage?: string;
}

/**
 * `ctx.steering`: the task's steering messages, each returned by exactly one read. Every read is a
 * checkpoint (a step named `steering:<n>`): a replay after input, a retry or a crash returns the same
 * messages in the same order and reads nothing twice. Reads take their turn one after the other.
 */
export interface Steering {
  /**
   * The next message not read yet. None yet: the task waits for one without a worker (the leg ends,
   * the task stays `working`, and a `tasks/steer` runs it again), up to `timeoutMs`; `undefined` when
   * that passes first.
   */
  next(opts?: SteeringWaitOptions): Promise<SteeringMessage | undefined>;
  /**
   * Every message sent and not read yet, oldest first, at once (none: `[]`); never waits. As many as
   * fit in one step (MAX_STEP_BYTES): the rest come with the next read.
   */
  pending(): Promise<SteeringMessage[]>;
}

const STEERING_NEEDS_A_TASK =
  "steering needs a task: give the tool taskSupport 'required' and steering: true (nobody can steer a synchronous call)";

/** `ctx.steering` where there is no task (a synchronous call): every read fails, saying why. */
export const NO_STEERING: Steering = {
  next: () => Promise.reject(new Error(STEERING_NEEDS_A_TASK)),
  pending: () => Promise.reject(new Error(STEERING_NEEDS_A_TASK)),
};
