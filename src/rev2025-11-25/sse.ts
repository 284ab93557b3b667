import type { SessionService } from './sessions/service.ts';

export const SSE_HEADERS = {
  'Content-Type': 'text/event-stream',
  'Cache-Control': 'no-cache',
  'X-Accel-Buffering': 'no',
} as const;

/**
 * One SSE stream of a 2025-11-25 session. Every event is appended to the session's stream log before
 * it is written, with the log's id as its SSE id, so a client that loses the stream resumes it on any
 * instance with `Last-Event-ID`. Writes after the client went away are dropped; the log keeps them.
 */
export class SessionStream {
  readonly body: ReadableStream<Uint8Array>;
  readonly #sessions: SessionService;
  readonly #sessionId: string;
  readonly streamId: string;
  readonly #encoder = new TextEncoder();
  #controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  #closed = false;
  /** Aborts when the client closes the stream. */
  readonly gone = new AbortController();

  constructor(sessions: SessionService, sessionId: string, streamId: string) {
    this.#sessions = sessions;
    this.#sessionId = sessionId;
    this.streamId = streamId;
    this.body = new ReadableStream<Uint8Array>({
      start: (controller) => void (this.#controller = controller),
      cancel: () => {
        this.#closed = true;
        this.gone.abort(new Error('client closed the stream'));
      },
    });
  }

  /** A priming event: an id to resume from, and how long to wait before reconnecting. */
  async prime(retryMs: number): Promise<void> {
    const id = await this.#sessions.appendEvent(this.#sessionId, this.streamId, null);
    this.#write(`id: ${id}\nretry: ${retryMs}\ndata: \n\n`);
  }

  /** Logs, then writes, one JSON-RPC message. */
  async send(message: object): Promise<void> {
    const id = await this.#sessions.appendEvent(this.#sessionId, this.streamId, message);
    this.writeEvent(id, message);
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
