import { assertWireValid } from './wire-schema.ts';
import { PROTOCOL_VERSION, TASK_CAPS } from './mcp.ts';

export interface ListenStream {
  status: number;
  contentType: string;
  /** The next JSON-RPC message on the stream (validated against the schema), or a timeout error. */
  next(timeoutMs?: number): Promise<Record<string, any>>;
  /** Every message so far. */
  readonly messages: Array<Record<string, any>>;
  /** How many SSE comment lines (keep-alives) arrived. */
  readonly comments: number;
  /** Resolves when the server ends the stream. */
  readonly ended: Promise<void>;
  close(): void;
}

/** Opens subscriptions/listen over a real socket and parses its SSE frames as they arrive. */
export async function listen(
  url: string,
  notifications: Record<string, unknown>,
  opts: { id?: number | string; caps?: Record<string, unknown>; headers?: Record<string, string> } = {},
): Promise<ListenStream> {
  const id = opts.id ?? Math.floor(Math.random() * 1e9);
  const abort = new AbortController();
  const res = await fetch(url, {
    method: 'POST',
    signal: abort.signal,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL_VERSION,
      'mcp-method': 'subscriptions/listen',
      ...opts.headers,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'subscriptions/listen',
      params: {
        notifications,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
          'io.modelcontextprotocol/clientCapabilities': opts.caps ?? TASK_CAPS,
        },
      },
    }),
  });
  return readSse(res, abort, (message) => assertWireValid('subscriptions/listen', message));
}

/**
 * Parses an SSE response's frames as they arrive: its JSON-RPC messages in order (`validate` sees
 * each), its comment lines counted. For any SSE response: subscriptions/listen, a 2025-11-25 call's
 * stream, a session's GET stream.
 */
export function readSse(
  res: Response,
  abort: AbortController = new AbortController(),
  validate: (message: Record<string, any>) => void = () => {},
): ListenStream {
  const messages: Array<Record<string, any>> = [];
  const waiters: Array<() => void> = [];
  let comments = 0;
  let buffer = '';
  let cursor = 0;
  const wake = () => waiters.splice(0).forEach((w) => w());
  const ended = (async () => {
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let sep: number;
        while ((sep = buffer.indexOf('\n\n')) >= 0) {
          const event = buffer.slice(0, sep);
          buffer = buffer.slice(sep + 2);
          for (const line of event.split('\n')) {
            if (line.startsWith(':')) comments++;
            // A priming event (an id to resume from, no message) carries empty data.
            else if (line.startsWith('data:') && line.slice(5).trim() !== '') {
              const message = JSON.parse(line.slice(5)) as Record<string, any>;
              validate(message);
              messages.push(message);
            }
          }
          wake();
        }
      }
    } catch {
      // aborted by close()
    } finally {
      wake();
    }
  })();
  let finished = false;
  void ended.then(() => (finished = true));
  return {
    status: res.status,
    contentType: res.headers.get('content-type') ?? '',
    messages,
    get comments() {
      return comments;
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
