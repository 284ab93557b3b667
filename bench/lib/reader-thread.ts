// Many tasks/stream readers in a worker thread of their own, so that what the bench process times
// meanwhile (another principal's tasks/get) does not wait on their parsing in the same event loop.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import type { SseStream } from '../../test/helpers/sse.ts';
import { openEventStream, type Principal } from './event-streams.ts';

interface ReadersSpec {
  url: string;
  who: Principal;
  /** Reader i follows taskIds[i % taskIds.length]. */
  taskIds: string[];
  readers: number;
}

/** What the readers got so far: messages in all, and how many readers got none. */
export interface ReaderCounts {
  messages: number;
  silent: number;
}

/** Streams opened at once (a thousand at once would time the opening, not the following). */
const OPENED_AT_ONCE = 50;
/** After the tasks ended, how long their streams get to end before they are closed. */
const END_MS = 10_000;

async function openReaders(spec: ReadersSpec) {
  const streams: SseStream[] = [];
  let messages = 0;
  for (let i = 0; i < spec.readers; i += OPENED_AT_ONCE) {
    const batch = Array.from({ length: Math.min(OPENED_AT_ONCE, spec.readers - i) }, (_, k) =>
      openEventStream(spec.url, spec.who, spec.taskIds[(i + k) % spec.taskIds.length]!, {
        onMessage: () => messages++,
      }),
    );
    streams.push(...(await Promise.all(batch)));
  }
  return {
    counts: (): ReaderCounts => ({
      messages,
      silent: streams.filter((s) => s.messages.length === 0).length,
    }),
    async end(): Promise<void> {
      const timeout = new Promise((resolve) => setTimeout(resolve, END_MS).unref());
      await Promise.race([Promise.all(streams.map((s) => s.ended)), timeout]);
      for (const s of streams) s.close();
    },
  };
}

export interface Readers {
  counts(): Promise<ReaderCounts>;
  /** Once their tasks ended: waits for the streams to end (closes them after END_MS); the last counts. */
  end(): Promise<ReaderCounts>;
}

/** `spec.readers` readers in a thread of their own, once every stream is open. */
export async function readersInThread(spec: ReadersSpec): Promise<Readers> {
  const thread = new Worker(new URL(import.meta.url), { workerData: spec });
  const answers: ((counts: ReaderCounts) => void)[] = [];
  let failed: (err: Error) => void = () => {};
  const failure = new Promise<never>((_, reject) => (failed = reject));
  failure.catch(() => {});
  thread.on('message', (m: ReaderCounts | 'open') => (m === 'open' ? undefined : answers.shift()?.(m)));
  thread.once('error', (err) => failed(err));
  thread.once('exit', (code) => failed(new Error(`the readers' thread exited (${code})`)));
  const ask = (what: 'count' | 'end') =>
    Promise.race([
      new Promise<ReaderCounts>((resolve) => {
        answers.push(resolve);
        thread.postMessage(what);
      }),
      failure,
    ]);
  await Promise.race([new Promise((resolve) => thread.once('message', resolve)), failure]);
  return {
    counts: () => ask('count'),
    end: () => ask('end').finally(() => thread.terminate()),
  };
}

if (!isMainThread && typeof (workerData as { readers?: unknown } | null)?.readers === 'number') {
  const readers = await openReaders(workerData as ReadersSpec);
  parentPort!.postMessage('open');
  parentPort!.on('message', (m: 'count' | 'end') => {
    void (m === 'end' ? readers.end() : Promise.resolve()).then(() =>
      parentPort!.postMessage(readers.counts()),
    );
  });
}
