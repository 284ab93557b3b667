import { randomBytes } from 'node:crypto';
import type { SessionService } from './sessions/service.ts';
import { StreamOrder } from './stream-order.ts';

export { SSE_HEADERS } from '../core/sse.ts';

/**
 * One SSE stream of a 2025-11-25 session. Every event is appended to the session's stream log before
 * it is written, with the log's id as its SSE id, so a client that loses the stream resumes it on any
 * instance with `Last-Event-ID`. Writes after the client went away are dropped; the log keeps them.
 *
 * A POST's stream is made `primed`: nothing exists of it until something must go out before the
 * answer (a notification, a server request, `closeStream`, a long wait), and then a priming event (an
 * id to resume from, and the `retry`) comes first. A request answered before that is plain JSON and
 * logs nothing.
 */
export class SessionStream {
  /** Aborts when the client closes the stream. */
  readonly gone = new AbortController();
  /** Resolves when the stream opens (its first event is under way). */
  readonly opened: Promise<void>;
  readonly #sessions: SessionService;
  readonly #sessionId: string;
  #streamId: string | undefined;
  readonly #retryMs: number | undefined;
  readonly #encoder = new TextEncoder();
  #body: ReadableStream<Uint8Array> | undefined;
  #controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  #closed = false;
  #opening: Promise<void> | undefined;
  #markOpened: () => void = () => {};
  /** What the stream sends, in order and logged in batches. */
  readonly #order = new StreamOrder({
    append: async (messages) => {
      await this.open();
      return this.#sessions.appendEvents(this.#sessionId, this.streamId, messages);
    },
    write: (eventId, message) => this.writeEvent(eventId, message),
  });

  constructor(
    sessions: SessionService,
    sessionId: string,
    streamId: string | undefined,
    { primeWithRetryMs }: { primeWithRetryMs?: number } = {},
  ) {
    this.#sessions = sessions;
    this.#sessionId = sessionId;
    this.#streamId = streamId;
    this.#retryMs = primeWithRetryMs;
    this.opened = new Promise((resolve) => (this.#markOpened = resolve));
    if (primeWithRetryMs === undefined) {
      this.#opening = Promise.resolve();
      void this.body;
    }
  }

  /** The response body (made on first use: a request answered as JSON never needs one). */
  get body(): ReadableStream<Uint8Array> {
    return (this.#body ??= new ReadableStream<Uint8Array>({
      start: (controller) => void (this.#controller = controller),
      cancel: () => {
        this.#closed = true;
        this.gone.abort(new Error('client closed the stream'));
      },
    }));
  }

  /**
   * The stream's id in the session's log (a new stream gets one when it first needs it). A POST's
   * stream's id starts with `post-`, a GET stream's with `get-` (see get.ts).
   */
  get streamId(): string {
    return (this.#streamId ??= `post-${randomBytes(12).toString('base64url')}`);
  }

  /** Whether the stream has opened: from then on it is the response. */
  get isOpen(): boolean {
    return this.#opening !== undefined;
  }

  /** Opens the stream (once): a primed stream's priming event is logged, then written. */
  open(): Promise<void> {
    if (this.#opening === undefined) {
      void this.body;
      this.#markOpened();
      this.#opening = this.#prime();
    }
    return this.#opening;
  }

  /**
   * Logs, then writes, one JSON-RPC message (opening the stream first), after what was sent before it
   * (see StreamOrder: `group` ties a task's events together).
   */
  send(message: object, group?: object): Promise<void> {
    return this.#order.send(message, group);
  }

  /** Runs `fn` once what is queued on the stream before it is done (a replay before live events). */
  inOrder<T>(fn: () => Promise<T>): Promise<T> {
    return this.#order.run(fn);
  }

  /** How many messages wait to be logged and written. */
  get pending(): number {
    return this.#order.pending;
  }

  /** Writes an event already in the log (a replay). */
  writeEvent(eventId: string, message: unknown): void {
    this.#write(`event: message\nid: ${eventId}\ndata: ${JSON.stringify(message)}\n\n`);
  }

  keepAlive(): void {
    this.#write(':\n\n');
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#controller?.close();
    } catch {
      // already closed by the client
    }
  }

  async #prime(): Promise<void> {
    const [id] = await this.#sessions.appendEvents(this.#sessionId, this.streamId, [null]);
    this.#write(`id: ${id}\nretry: ${this.#retryMs}\ndata: \n\n`);
  }

  #write(text: string): void {
    if (this.#closed || this.#controller === undefined) return;
    try {
      this.#controller.enqueue(this.#encoder.encode(text));
    } catch {
      this.#closed = true;
      this.gone.abort(new Error('stream closed'));
    }
  }
}
