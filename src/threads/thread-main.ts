// A sync-call thread: loads the tools module, then runs the handlers of the synchronous calls the HTTP
// process sends it, each with a request context whose stream and events are asked of that process.
import { parentPort, workerData } from 'node:worker_threads';
import type { ServerEvents } from '../core/server-events.ts';
import { createToolContext } from '../tools/context.ts';
import type { ToolDefinition } from '../tools/define.ts';
import { createRequestBackend } from '../tools/request-backend.ts';
import { encodeThrown, type Ask, type FromThread, type ToThread } from './messages.ts';
import { toolsOf } from './tools-of.ts';

const port = parentPort!;
const send = (message: FromThread) => port.postMessage(message);

const calls = new Map<number, AbortController>();
const answers = new Map<number, { resolve: () => void; reject: (err: Error) => void }>();
let nextSeq = 0;

/** Asks the HTTP process to do something for call `id` and waits for it to be done. */
function ask(id: number, what: Ask): Promise<void> {
  const seq = nextSeq++;
  return new Promise((resolve, reject) => {
    answers.set(seq, { resolve, reject });
    send({ type: 'ask', id, seq, ask: what });
  });
}

/** Sends what a handler threw (by its message alone when what it carries cannot be cloned). */
function fail(id: number, err: unknown, ms: number): void {
  try {
    send({ type: 'failed', id, error: encodeThrown(err), ms });
  } catch {
    send({ type: 'failed', id, error: { kind: 'error', message: String(err) }, ms });
  }
}

async function run(tools: Map<string, ToolDefinition>, message: Extract<ToThread, { type: 'call' }>) {
  const { id, ctx } = message;
  const aborter = new AbortController();
  calls.set(id, aborter);
  const started = performance.now();
  try {
    const tool = tools.get(message.tool);
    if (tool === undefined) throw new Error(`Unknown tool: ${message.tool}`);
    const events: ServerEvents = {
      listChanged: (kind) => ask(id, { op: 'listChanged', kind }),
      resourceUpdated: (uri) => ask(id, { op: 'resourceUpdated', uri }),
    };
    const backend = createRequestBackend({
      principal: ctx.principal,
      clientCapabilities: ctx.clientCapabilities,
      signal: aborter.signal,
      events,
      responses: ctx.responses,
      progressToken: ctx.progressToken,
      logLevel: ctx.logLevel,
      notify: ctx.canNotify ? (notification) => ask(id, { op: 'notify', notification }) : undefined,
      closeStream: ctx.canCloseStream ? () => void ask(id, { op: 'closeStream' }).catch(() => {}) : undefined,
    });
    const args: unknown = tool.inputSchema.parse(message.arguments);
    const result = await tool.handler(args, createToolContext(backend));
    send({ type: 'done', id, result, ms: performance.now() - started });
  } catch (err) {
    fail(id, err, performance.now() - started);
  } finally {
    calls.delete(id);
  }
}

const url = workerData as string;
try {
  const tools = new Map(toolsOf((await import(url)) as Record<string, unknown>, url).map((t) => [t.name, t]));
  port.on('message', (message: ToThread) => {
    switch (message.type) {
      case 'call':
        void run(tools, message);
        return;
      case 'abort':
        calls.get(message.id)?.abort(new Error(message.reason));
        return;
      case 'answer': {
        const waiting = answers.get(message.seq);
        answers.delete(message.seq);
        if (message.error === undefined) waiting?.resolve();
        else waiting?.reject(new Error(message.error));
        return;
      }
    }
  });
  send({ type: 'ready', tools: [...tools.keys()] });
} catch (err) {
  send({ type: 'load-failed', message: err instanceof Error ? err.message : String(err) });
}
