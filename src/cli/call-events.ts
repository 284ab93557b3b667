// `durable-mcp-tasks call` prints a task's events while it runs (tasks/stream, through the client's
// events iterator): its partial output as lines, its other events as a compact line each. The cursor is
// kept in the client's state folder, so `--resume` prints only what the killed call had not.
import type { TaskEvent, TasksClient } from '../client/index.ts';
import { McpRpcError } from '../client/index.ts';
import { eventLines, PLAIN_EVENT_WIDTH, type Output } from './terminal-output.ts';

/** JSON-RPC's code for a method the server does not have: a server without task events. */
const METHOD_NOT_FOUND = -32601;
/** How long the events may trail the outcome before the call stops waiting for them. */
const TRAIL_MS = 10_000;

export interface EventPrinter {
  /** Waits for the events to end (the task's last one), `TRAIL_MS` at most, then stops reading. */
  finish(): Promise<void>;
  /** Stops reading now. */
  stop(): void;
}

/** Starts printing the task's events through `output`, from the cursor the client's store keeps. */
export function printTaskEvents(
  client: TasksClient,
  taskId: string,
  output: Output,
  stdout: { isTTY?: boolean; columns?: number } = process.stdout,
): EventPrinter {
  const stop = new AbortController();
  const format = { tty: stdout.isTTY === true, width: widthOf(stdout) };
  const print = (event: TaskEvent) => {
    for (const line of eventLines(event, format)) output.print(line);
  };
  const events = client.events(taskId, {
    signal: stop.signal,
    ifGone: 'skip',
    onGone: (gone) => note(output, `events before ${gone.earliestSeq} are no longer kept: skipped`),
  });
  const done = (async () => {
    for await (const event of events) print(event);
  })().catch((err: unknown) => {
    if (stop.signal.aborted) return;
    // A server without task events shows the task as before; any other failure is said once.
    if (err instanceof McpRpcError && err.code === METHOD_NOT_FOUND) return;
    note(output, `task events: ${err instanceof Error ? err.message : String(err)}`);
  });
  return {
    async finish() {
      const timer = setTimeout(() => stop.abort(), TRAIL_MS);
      await done;
      clearTimeout(timer);
    },
    stop() {
      stop.abort();
    },
  };
}

function widthOf(stdout: { isTTY?: boolean; columns?: number }): number {
  return stdout.isTTY === true ? Math.max(20, (stdout.columns || 80) - 1) : PLAIN_EVENT_WIDTH;
}

/** A line about the events on stderr, clear of the status line. */
function note(output: Output, line: string): void {
  output.clear();
  process.stderr.write(`(${line})\n`);
}
