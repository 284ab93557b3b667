/**
 * Natural batching ("group commit") for a write that many concurrent callers make: a call made while
 * `maxInFlight` batches are already running waits for one of them and goes with every call that
 * queued meanwhile, as one statement. Under no load a call runs at once (after the current tick, so
 * calls made in the same tick share a batch); under load the batches grow with it, and the number of
 * statements, round trips and commits per call falls.
 *
 * `run` answers one output (or a promise of it) per input, in order. When it throws, each call of the batch is retried on
 * its own with `single`, so one bad input fails only its own call.
 */
export function coalesce<I, O>(
  run: (inputs: I[]) => Promise<(O | PromiseLike<O>)[]>,
  single: (input: I) => Promise<O>,
  { maxInFlight = 2, maxBatch = 100 }: { maxInFlight?: number; maxBatch?: number } = {},
): (input: I) => Promise<O> {
  let queue: { input: I; resolve: (o: O | PromiseLike<O>) => void; reject: (e: unknown) => void }[] = [];
  let inFlight = 0;
  let scheduled = false;

  const flush = () => {
    scheduled = false;
    while (inFlight < maxInFlight && queue.length > 0) {
      const batch = queue.slice(0, maxBatch);
      queue = queue.slice(batch.length);
      inFlight++;
      const inputs = batch.map((b) => b.input);
      void run(inputs)
        .then(
          (outputs) => batch.forEach((b, i) => b.resolve(outputs[i] as O | PromiseLike<O>)),
          () => batch.forEach((b) => void single(b.input).then(b.resolve, b.reject)),
        )
        .finally(() => {
          inFlight--;
          flush();
        });
    }
  };

  return (input) =>
    new Promise<O>((resolve, reject) => {
      queue.push({ input, resolve, reject });
      if (!scheduled && inFlight < maxInFlight) {
        scheduled = true;
        queueMicrotask(flush);
      }
    });
}
