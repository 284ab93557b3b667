import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { CallToolResult } from '../core/wire.ts';
import type { RequestBackendOptions } from '../tools/request-backend.ts';
import type { SyncRun } from '../tools/sync-runner.ts';
import { decodeThrown, type Ask, type FromThread, type ToThread } from './messages.ts';

// thread-main.ts from source (under tsx or vitest), thread-main.js once built.
const ENTRY = new URL(`./thread-main${path.extname(fileURLToPath(import.meta.url))}`, import.meta.url);

/**
 * Node flags for a thread: the process's own (Node leaves out the V8 ones a thread cannot take, such as
 * --max-semi-space-size), or tsx's loader alone when the entry is TypeScript and the process has none
 * (e.g. under vitest).
 */
function threadOptions(): { execArgv?: string[] } {
  const tsx = [...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((a) => a.includes('tsx'));
  return ENTRY.pathname.endsWith('.ts') && !tsx ? { execArgv: ['--import', 'tsx'] } : {};
}

interface InFlight {
  backend: RequestBackendOptions;
  /** Told how long the handler's run took on the thread, however it ended. */
  ran?: ((ms: number) => void) | undefined;
  resolve: (result: CallToolResult) => void;
  reject: (err: Error) => void;
}

/** One worker thread running synchronous calls' handlers, any number at once (they interleave on its loop). */
export class SyncCallThread {
  readonly #worker: Worker;
  readonly #calls = new Map<number, InFlight>();
  #nextId = 0;
  /** The tools the thread loaded, once it is ready. */
  readonly ready: Promise<string[]>;
  /** Settles when the thread has exited (its calls were rejected). */
  readonly exited: Promise<void>;

  /** `moduleUrl`: the tools module, which the thread imports. */
  constructor(moduleUrl: string) {
    this.#worker = new Worker(ENTRY, { workerData: moduleUrl, ...threadOptions() });
    this.#worker.unref();
    this.ready = new Promise((resolve, reject) => {
      // A thread's uncaught error ends it: its calls are rejected on 'exit' (see `exited`).
      this.#worker.on('error', reject);
      this.#worker.once('exit', (code) => reject(new Error(`exited with code ${code} before it was ready`)));
      this.#worker.on('message', (message: FromThread) => {
        if (message.type === 'ready') resolve(message.tools);
        else if (message.type === 'load-failed') reject(new Error(message.message));
        else this.#onMessage(message);
      });
    });
    this.ready.catch(() => {});
    this.exited = new Promise((resolve) =>
      this.#worker.once('exit', (code) => {
        for (const call of this.#calls.values()) call.reject(new Error(`the tool's thread exited (${code})`));
        this.#calls.clear();
        resolve();
      }),
    );
  }

  get inFlight(): number {
    return this.#calls.size;
  }

  /** `ran`: told how long the handler's run took on the thread (not counting the hop), however it ended. */
  run({ toolName, arguments: args, backend }: SyncRun, ran?: (ms: number) => void): Promise<CallToolResult> {
    const id = this.#nextId++;
    return new Promise<CallToolResult>((resolve, reject) => {
      const abort = () =>
        this.#post({ type: 'abort', id, reason: String(backend.signal.reason ?? 'aborted') });
      const settle = () => backend.signal.removeEventListener('abort', abort);
      this.#calls.set(id, {
        backend,
        ran,
        resolve: (result) => (settle(), resolve(result)),
        reject: (err) => (settle(), reject(err)),
      });
      this.#post({
        type: 'call',
        id,
        tool: toolName,
        arguments: args,
        ctx: {
          principal: backend.principal,
          clientCapabilities: backend.clientCapabilities,
          responses: backend.responses,
          progressToken: backend.progressToken,
          logLevel: backend.logLevel,
          canNotify: backend.notify !== undefined,
          canCloseStream: backend.closeStream !== undefined,
        },
      });
      if (backend.signal.aborted) abort();
      else backend.signal.addEventListener('abort', abort, { once: true });
    });
  }

  /** Ends the thread at once: a handler that never yields cannot be asked to stop. */
  async stop(): Promise<void> {
    await this.#worker.terminate();
    await this.exited;
  }

  #post(message: ToThread): void {
    this.#worker.postMessage(message);
  }

  #onMessage(message: Exclude<FromThread, { type: 'ready' | 'load-failed' }>): void {
    const call = this.#calls.get(message.id);
    switch (message.type) {
      case 'done':
        this.#calls.delete(message.id);
        call?.ran?.(message.ms);
        call?.resolve(message.result);
        return;
      case 'failed':
        this.#calls.delete(message.id);
        call?.ran?.(message.ms);
        call?.reject(decodeThrown(message.error));
        return;
      case 'ask':
        doAsk(call?.backend, message.ask).then(
          () => this.#post({ type: 'answer', seq: message.seq }),
          (err: unknown) =>
            this.#post({
              type: 'answer',
              seq: message.seq,
              error: err instanceof Error ? err.message : String(err),
            }),
        );
        return;
    }
  }
}

/** Does on the HTTP process what a handler asked (its call may have ended meanwhile: then nothing). */
async function doAsk(backend: RequestBackendOptions | undefined, ask: Ask): Promise<void> {
  if (backend === undefined) return;
  switch (ask.op) {
    case 'notify':
      return backend.notify?.(ask.notification);
    case 'closeStream':
      return backend.closeStream?.();
    case 'listChanged':
      return backend.events?.listChanged(ask.kind);
    case 'resourceUpdated':
      return backend.events?.resourceUpdated(ask.uri);
  }
}
