/**
 * The one SSE parser of the suite (tests, system tests): `SseParser` splits a text/event-stream into
 * events as chunks arrive, `sseMessages` reads a whole body, `readSse` a live response.
 */

/** One server-sent event: its id (a resume point), its retry (ms), and its data lines, joined by a newline. */
export interface SseEvent {
  id?: string;
  event?: string;
  retry?: number;
  data: string;
}

/**
 * An incremental text/event-stream parser (WHATWG "event stream interpretation"): `push` a chunk,
 * get the events it completed. Comment lines (`:` keep-alives) are counted, not returned.
 */
export class SseParser {
  #buffer = '';
  comments = 0;

  push(chunk: string): SseEvent[] {
    this.#buffer += chunk.replace(/\r\n?/g, '\n');
    const events: SseEvent[] = [];
    let sep: number;
    while ((sep = this.#buffer.indexOf('\n\n')) >= 0) {
      const block = this.#buffer.slice(0, sep);
      this.#buffer = this.#buffer.slice(sep + 2);
      const event = this.#event(block);
      if (event !== undefined) events.push(event);
    }
    return events;
  }

  /** The events of a body that ended (a last event without its blank line counts too). */
  end(): SseEvent[] {
    const rest = this.#buffer;
    this.#buffer = '';
    const event = rest.trim() === '' ? undefined : this.#event(rest);
    return event === undefined ? [] : [event];
  }

  #event(block: string): SseEvent | undefined {
    const data: string[] = [];
    let id: string | undefined;
    let type: string | undefined;
    let retry: number | undefined;
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) {
        this.comments++;
        continue;
      }
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'data') data.push(value);
      else if (field === 'id') id = value;
      else if (field === 'event') type = value;
      else if (field === 'retry' && /^\d+$/.test(value)) retry = Number(value);
    }
    if (data.length === 0 && id === undefined) return undefined;
    return {
      ...(id === undefined ? {} : { id }),
      ...(type === undefined ? {} : { event: type }),
      ...(retry === undefined ? {} : { retry }),
      data: data.join('\n'),
    };
  }
}

/** The JSON-RPC messages of SSE events; a priming event (an id to resume from, empty data) carries none. */
export function eventMessages(events: readonly SseEvent[]): Array<Record<string, any>> {
  return events.filter((e) => e.data.trim() !== '').map((e) => JSON.parse(e.data) as Record<string, any>);
}

/** The JSON-RPC messages of a whole text/event-stream body. */
export function sseMessages(text: string): Array<Record<string, any>> {
  const parser = new SseParser();
  return eventMessages([...parser.push(text), ...parser.end()]);
}

export interface SseStream {
  status: number;
  contentType: string;
  /** The next JSON-RPC message on the stream (after `validate` saw it), or a timeout error. */
  next(timeoutMs?: number): Promise<Record<string, any>>;
  /** Every message so far. */
  readonly messages: Array<Record<string, any>>;
  /** Every event so far, as it came (its id, its data), priming events included. */
  readonly events: SseEvent[];
  /** How many SSE comment lines (keep-alives) arrived. */
  readonly comments: number;
  /** Resolves when the server ends the stream. */
  readonly ended: Promise<void>;
  close(): void;
}

/**
 * Parses an SSE response's events as they arrive: its JSON-RPC messages in order (`validate` sees
 * each), its comment lines counted. For any SSE response: subscriptions/listen, a 2025-11-25 call's
 * stream, a session's GET stream.
 */
export function readSse(
  res: Response,
  abort: AbortController = new AbortController(),
  validate: (message: Record<string, any>) => void = () => {},
): SseStream {
  const messages: Array<Record<string, any>> = [];
  const events: SseEvent[] = [];
  const waiters: Array<() => void> = [];
  const parser = new SseParser();
  let cursor = 0;
  const wake = () => waiters.splice(0).forEach((w) => w());
  const take = (taken: SseEvent[]) => {
    events.push(...taken);
    for (const message of eventMessages(taken)) {
      validate(message);
      messages.push(message);
    }
    wake();
  };
  let finished = false;
  const ended = (async () => {
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        take(parser.push(decoder.decode(value, { stream: true })));
      }
      take(parser.end());
    } catch {
      // aborted by close()
    } finally {
      // (Marked ended before the waiters wake: a next() waiting now must see it, not wait out its timeout.)
      finished = true;
      wake();
    }
  })();
  return {
    status: res.status,
    contentType: res.headers.get('content-type') ?? '',
    messages,
    events,
    get comments() {
      return parser.comments;
    },
    ended,
    async next(timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      while (cursor >= messages.length) {
        if (finished) throw new Error('stream ended');
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no message within ${timeoutMs} ms (got ${JSON.stringify(messages)})`);
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(t);
            resolve();
          });
        });
      }
      return messages[cursor++]!;
    },
    close: () => abort.abort(),
  };
}
