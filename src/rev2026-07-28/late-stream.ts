import { SSE_HEADERS } from '../core/sse.ts';
import { SERIALIZED, type Serialized } from '../core/task-events.ts';
import type { Notification } from '../core/wire.ts';

/**
 * A POST's response that becomes an SSE stream only when the method sends a notification before its
 * result (progress, log messages, a subscription's acknowledgement); most requests never do, and get
 * plain JSON. A stream the client closes aborts `abort`, and so the request.
 */
export class LateStream {
  readonly #abort: AbortController;
  readonly #encoder = new TextEncoder();
  #controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  #body: ReadableStream<Uint8Array> | undefined;
  #streaming = false;
  #startStream: () => void = () => {};
  /** Resolves when the first notification turned the response into a stream. */
  readonly started = new Promise<'stream'>((resolve) => (this.#startStream = () => resolve('stream')));

  constructor(abort: AbortController) {
    this.#abort = abort;
  }

  get streaming(): boolean {
    return this.#streaming;
  }

  /** Sends a request-scoped notification, turning the response into a stream at the first one. */
  readonly notify = async (notification: Notification): Promise<void> => {
    if (this.#abort.signal.aborted) return;
    if (!this.#streaming) {
      this.#streaming = true;
      this.#open();
      this.#startStream();
    }
    const json = (notification as Serialized)[SERIALIZED];
    this.#write(json === undefined ? frame({ jsonrpc: '2.0', ...notification }) : frameOf(json));
  };

  /**
   * The streamed response: keep-alive comments every `keepAliveMs` until `outcome` settles, then the
   * message `final` makes of it as the last event (unless the client went away: then nothing is made;
   * or `final` makes nothing: the stream ends without a result, for the client to resume the request).
   */
  respond<T>(outcome: Promise<T>, final: (outcome: T) => object | undefined, keepAliveMs: number): Response {
    const keepAlive = setInterval(() => this.#write(':\n\n'), keepAliveMs);
    void outcome.then((settled) => {
      clearInterval(keepAlive);
      if (this.#abort.signal.aborted) return;
      const last = final(settled);
      if (last !== undefined) this.#write(frame(last));
      this.#controller?.close();
    });
    return new Response(this.#open(), { status: 200, headers: SSE_HEADERS });
  }

  #open(): ReadableStream<Uint8Array> {
    return (this.#body ??= new ReadableStream<Uint8Array>({
      start: (ctl) => void (this.#controller = ctl),
      cancel: () => this.#abort.abort(new Error('client closed the stream')),
    }));
  }

  #write(text: string): void {
    if (this.#abort.signal.aborted || this.#controller === undefined) return;
    try {
      this.#controller.enqueue(this.#encoder.encode(text));
    } catch {
      this.#abort.abort(new Error('stream closed'));
    }
  }
}

const frameOf = (json: string) => `event: message\ndata: ${json}\n\n`;
const frame = (message: object) => frameOf(JSON.stringify(message));
