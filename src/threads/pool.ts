import type { Logger } from '../log.ts';
import type { SyncCallRunner } from '../tools/sync-runner.ts';
import { LoopBudget } from './loop-budget.ts';
import { SyncCallThread } from './thread.ts';

export interface SyncCallThreadsOptions {
  /** The URL of the module the tools come from (it exports them as `--tools` modules do). */
  moduleUrl: string;
  threads: number;
  /** A handler whose runs on a thread all take less (µs) runs on the event loop instead; 0: never. */
  loopBudgetUs: number;
  log: Logger;
}

export interface SyncCallThreads extends SyncCallRunner {
  stop(): Promise<void>;
}

/**
 * Worker threads for synchronous calls' handlers, so that a CPU-bound handler does not hold the HTTP
 * process's event loop (and every other request with it). Each thread loads the tools module; a call
 * goes to the thread with the fewest calls in flight, unless the tool's runs have proved cheaper than
 * the hop (LoopBudget): then it runs on the event loop. A thread that exits (a handler crashed it) is
 * replaced. Undefined when no thread could load the module: the calls then run on the event loop.
 */
export async function startSyncCallThreads(
  opts: SyncCallThreadsOptions,
): Promise<SyncCallThreads | undefined> {
  const { moduleUrl, log } = opts;
  const threads: SyncCallThread[] = [];
  let stopping = false;
  let tools = new Set<string>();

  const spawn = async (index: number): Promise<void> => {
    const thread = new SyncCallThread(moduleUrl);
    threads[index] = thread;
    tools = new Set(await thread.ready);
    void thread.exited.then(() => {
      if (stopping || threads[index] !== thread) return;
      log.warn('a sync-call thread exited: starting another', { thread: index });
      spawn(index).catch((err: unknown) =>
        log.error('a sync-call thread failed to start', { error: String(err) }),
      );
    });
  };

  try {
    await Promise.all(Array.from({ length: opts.threads }, (_, i) => spawn(i)));
  } catch (err) {
    log.warn('synchronous calls run on the event loop: their threads could not load the tools', {
      module: moduleUrl,
      error: err instanceof Error ? err.message : String(err),
    });
    stopping = true;
    await Promise.all(threads.map((t) => t.stop()));
    return undefined;
  }
  log.debug('sync-call threads started', { threads: opts.threads, tools: [...tools] });

  const budget = new LoopBudget({ budgetUs: opts.loopBudgetUs });
  return {
    runs: (toolName) => tools.has(toolName) && !budget.onLoop(toolName),
    run(call) {
      const least = threads.reduce((a, b) => (b.inFlight < a.inFlight ? b : a));
      return least.run(call, (ms) => budget.ranOnThread(call.toolName, ms));
    },
    ranOnLoop(toolName, ms) {
      if (!budget.ranOnLoop(toolName, ms)) return;
      log.warn(
        'a synchronous tool held the event loop past SYNC_CALL_LOOP_BUDGET_US: its calls run on threads again',
        {
          tool: toolName,
          ms: Math.round(ms),
        },
      );
    },
    async stop() {
      stopping = true;
      await Promise.all(threads.map((t) => t.stop()));
    },
  };
}
