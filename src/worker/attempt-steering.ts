// ctx.steering in a task's attempt (SEP-2669 draft): the `n`th read of the handler is the step
// `steering:<n>`, holding the messages it returned, so a replay returns the same ones and the reads after
// it go on from its last message: each message is returned by exactly one read. A read that must wait
// records until when first (`steering:<n>:wait`), then parks the task (no slot, no lease) until a
// message comes (`tasks/steer` queues its run) or that time passes.
import { jsonBytes } from '../core/limits.ts';
import {
  readSteering,
  steeringReadStepName,
  steeringWaitStepName,
  type StoredSteering,
} from '../tasks/store/steering.ts';
import type { Steering, SteeringMessage, SteeringWaitOptions } from '../tools/steering.ts';
import { PARKED_RECHECK_MS, type AttemptSignalsOptions } from './attempt-signals.ts';
import { infra, Park } from './leg-stops.ts';

/**
 * What a wait for a signal needs, a wait for steering needs too (`steps`: the reads earlier legs made,
 * and whether one was waiting); and a read returns at most what fits in one step (MAX_STEP_BYTES).
 */
export type AttemptSteeringOptions = Omit<AttemptSignalsOptions, 'signalUrl'> & {
  maxStepBytes?: number | undefined;
};

/** One read: its number among the handler's reads, and the last message the reads before it returned. */
type Read = (n: number, afterSeq: number) => Promise<StoredSteering[]>;

/** `ctx.steering` of one attempt. */
export function createAttemptSteering(opts: AttemptSteeringOptions): Steering {
  let reads = 0;
  let lastSeq = 0;
  let turn: Promise<unknown> = Promise.resolve();
  // One read at a time, in the order they were asked for: each goes on after what the one before returned.
  const inTurn = (read: Read): Promise<SteeringMessage[]> => {
    const n = ++reads;
    const done = turn
      .then(() => read(n, lastSeq))
      .then((got) => {
        lastSeq = got.at(-1)?.seq ?? lastSeq;
        return got.map(toSteeringMessage);
      });
    turn = done.catch(() => {});
    return done;
  };
  return {
    pending: () =>
      inTurn((n, afterSeq) =>
        opts.step(steeringReadStepName(n), async () =>
          fitting(await readSteering(opts.db, opts.task.taskId, afterSeq).catch(infra), opts.maxStepBytes),
        ),
      ),
    next: async (waitOpts = {}) =>
      (await inTurn((n, afterSeq) => nextMessage(opts, n, afterSeq, waitOpts)))[0],
  };
}

/** The message after `afterSeq`, if one was sent: one row at most. */
const look = (opts: AttemptSteeringOptions, afterSeq: number) =>
  readSteering(opts.db, opts.task.taskId, afterSeq, 1).catch(infra);

/**
 * `next`: a read with no wait recorded returns what it recorded (a replay), or the message there now;
 * with none there now it waits, unless `timeoutMs` is 0 (then it records that it found none).
 */
async function nextMessage(
  opts: AttemptSteeringOptions,
  n: number,
  afterSeq: number,
  waitOpts: SteeringWaitOptions,
): Promise<StoredSteering[]> {
  const readName = steeringReadStepName(n);
  if (!opts.steps.values.has(steeringWaitStepName(n))) {
    if (opts.steps.values.has(readName) || opts.replayOnly) {
      return opts.step(readName, () => look(opts, afterSeq));
    }
    const now = await look(opts, afterSeq);
    if (now.length > 0 || waitOpts.timeoutMs === 0) return opts.step(readName, () => now);
  }
  return waitForMessage(opts, n, afterSeq, waitOpts);
}

/**
 * A read that waits: its deadline recorded once (none without `timeoutMs`), then the message if one
 * came, nothing once the deadline passed, or else the task parks until either. A message sent while the
 * leg parks is seen by the park's last look (settle.ts), one sent after it queues the task's run.
 */
async function waitForMessage(
  opts: AttemptSteeringOptions,
  n: number,
  afterSeq: number,
  { timeoutMs, statusMessage }: SteeringWaitOptions,
): Promise<StoredSteering[]> {
  const readName = steeringReadStepName(n);
  const deadline = await opts.step(steeringWaitStepName(n), () =>
    timeoutMs === undefined ? null : new Date(Date.now() + timeoutMs).toISOString(),
  );
  if (opts.steps.values.has(readName) || opts.replayOnly) {
    return opts.step(readName, () => look(opts, afterSeq));
  }
  const found = await look(opts, afterSeq);
  const until = deadline === null ? undefined : new Date(deadline).getTime();
  if (found.length > 0 || (until !== undefined && until <= Date.now())) {
    return opts.step(readName, () => found);
  }
  opts.signal.throwIfAborted();
  await opts.status.flush();
  const recheck = Date.now() + PARKED_RECHECK_MS;
  throw new Park(
    new Date(Math.min(recheck, until ?? recheck)),
    statusMessage ?? 'Waiting for a steering message',
    { steering: afterSeq },
  );
}

/** The first messages whose JSON fits in `maxBytes` together (one at least: a step says if it is too large). */
function fitting(messages: StoredSteering[], maxBytes: number | undefined): StoredSteering[] {
  if (maxBytes === undefined) return messages;
  let bytes = 2;
  let count = 0;
  for (const message of messages) {
    bytes += jsonBytes(message) + 1;
    if (count > 0 && bytes > maxBytes) break;
    count++;
  }
  return messages.slice(0, count);
}

const toSteeringMessage = (m: StoredSteering): SteeringMessage => ({
  seq: m.seq,
  message: m.message,
  sentAt: new Date(m.sentAt),
});
