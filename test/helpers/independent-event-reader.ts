/**
 * A reader of task event streams written from the SEP-2694 draft alone
 * (modelcontextprotocol/modelcontextprotocol PR #2694, seps/2694-resumable-task-event-streams.md), so
 * that our server's `tasks/stream` is checked against the draft's text rather than against our own
 * reading of it. It shares no code with src/ or the other test helpers: plain fetch, its own SSE parser
 * (the WHATWG event-stream format), its own checks.
 *
 * What comes from outside the draft: the request envelope of the 2026-07-28 revision the draft sits on
 * (the MCP-Protocol-Version, Mcp-Method and Mcp-Name headers, and the protocol version, client
 * capabilities with the Tasks extension and client info in `_meta`), and reading a result that carries
 * only `resultType` and `_meta` as the draft's empty result (2026-07-28 results say their `resultType`).
 *
 * The draft's rules it checks, each broken one reported in `violations`:
 * - `notifications/tasks/event` params: `seq` a non-negative integer, `taskId` the task asked for,
 *   `type` a string, `payload` a JSON object, and `_meta["io.modelcontextprotocol/related-task"].taskId`
 *   the same task id ("Receivers MUST include io.modelcontextprotocol/related-task metadata").
 * - "each subsequent event for that task MUST increment by exactly 1": within one stream, each seq is
 *   one more than the one before; with `after`, the first is `after + 1` ("MUST NOT silently skip
 *   retained events after the requested cursor").
 * - The stream ends with an empty result, or with a JSON-RPC error.
 * Where the first seq of a task stands (the draft: 0) is left to the caller: `firstSeq` says it.
 */

const REVISION = '2026-07-28';
const RELATED_TASK = 'io.modelcontextprotocol/related-task';

/** A task event as the draft defines it. */
export interface DraftTaskEvent {
  seq: number;
  taskId: string;
  type: string;
  payload: Record<string, unknown>;
  _meta?: Record<string, unknown>;
}

export interface DraftStreamRead {
  events: DraftTaskEvent[];
  /**
   * How the read ended: `result` (the stream's result), `error` (a JSON-RPC error), `stopped` (this
   * reader disconnected after `stopAfter` events), `eof` (the body ended without a response).
   */
  end: 'result' | 'error' | 'stopped' | 'eof';
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
  /** The seq of the first event read, if any. */
  firstSeq?: number;
  /** The draft's rules this read saw broken. */
  violations: string[];
  /** Whether the answer was an SSE stream (else one JSON response). */
  streamed: boolean;
}

export interface DraftStreamOptions {
  /** The exclusive resume cursor (`after`); omitted: from the earliest retained event. */
  after?: number;
  /** Disconnects (aborts the request) once this many events were read. */
  stopAfter?: number;
  /** Extra HTTP headers (authorization). */
  headers?: Record<string, string>;
}

/** One SSE event: its `data` lines joined, and its `event` name. */
interface SseEvent {
  event: string;
  data: string;
}

/**
 * An SSE parser after the WHATWG event-stream rules: lines end with CRLF, LF or CR; a line starting
 * with `:` is a comment; `field: value` loses one leading space of its value; `data` lines join with
 * LF; a blank line dispatches the event (an event with no data is dropped).
 */
class EventStreamParser {
  #pending = '';
  #data: string[] = [];
  #event = '';

  feed(text: string): SseEvent[] {
    this.#pending += text;
    const out: SseEvent[] = [];
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.#pending);
      // A CR at the very end may be the first half of a CRLF: wait for more.
      if (match === null || (match[0] === '\r' && match.index === this.#pending.length - 1)) break;
      const line = this.#pending.slice(0, match.index);
      this.#pending = this.#pending.slice(match.index + match[0].length);
      const dispatched = this.#line(line);
      if (dispatched !== undefined) out.push(dispatched);
    }
    return out;
  }

  #line(line: string): SseEvent | undefined {
    if (line === '') {
      const event = { event: this.#event || 'message', data: this.#data.join('\n') };
      const had = this.#data.length > 0;
      this.#data = [];
      this.#event = '';
      return had ? event : undefined;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.#data.push(value);
    else if (field === 'event') this.#event = value;
    return undefined;
  }
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The draft's checks on one notification's params; the event when it is one. */
function checkEvent(params: unknown, taskId: string, violations: string[]): DraftTaskEvent | undefined {
  if (!isObject(params)) {
    violations.push('a notifications/tasks/event without params');
    return undefined;
  }
  const { seq, type, payload, _meta } = params;
  const where = `event ${JSON.stringify(seq)}`;
  if (typeof seq !== 'number' || !Number.isInteger(seq) || seq < 0) {
    violations.push(`${where}: seq is not a non-negative integer`);
    return undefined;
  }
  if (params.taskId !== taskId) violations.push(`${where}: taskId ${String(params.taskId)}, not ${taskId}`);
  if (typeof type !== 'string') violations.push(`${where}: type is not a string`);
  if (!isObject(payload)) violations.push(`${where}: payload is not a JSON object`);
  const related = isObject(_meta) && isObject(_meta[RELATED_TASK]) ? _meta[RELATED_TASK] : undefined;
  if (related?.taskId !== taskId) violations.push(`${where}: _meta lacks ${RELATED_TASK} for ${taskId}`);
  return {
    seq,
    taskId,
    type: String(type),
    payload: isObject(payload) ? payload : {},
    ...(isObject(_meta) ? { _meta } : {}),
  };
}

/** Whether a result is the draft's empty result (2026-07-28 results may say their resultType). */
function isEmptyResult(result: Record<string, unknown>): boolean {
  return Object.keys(result).every((k) => k === '_meta' || (k === 'resultType' && result[k] === 'complete'));
}

/** Sorts each JSON-RPC message of the stream into the read. */
function take(message: unknown, id: number, taskId: string, read: DraftStreamRead, after?: number): boolean {
  if (!isObject(message)) {
    read.violations.push('an SSE event whose data is not a JSON object');
    return false;
  }
  if (message.method === 'notifications/tasks/event') {
    const event = checkEvent(message.params, taskId, read.violations);
    if (event === undefined) return false;
    const last = read.events.at(-1)?.seq ?? after;
    if (last !== undefined && event.seq !== last + 1) {
      read.violations.push(`event ${event.seq} follows ${last}: the draft says exactly one more`);
    }
    read.firstSeq ??= event.seq;
    read.events.push(event);
    return false;
  }
  if (message.id !== id) return false;
  if (isObject(message.error)) {
    read.end = 'error';
    read.error = message.error as DraftStreamRead['error'];
  } else if (isObject(message.result)) {
    read.end = 'result';
    read.result = message.result;
    if (!isEmptyResult(message.result))
      read.violations.push('the stream ended with a result that is not empty');
  } else {
    read.violations.push('a response with neither result nor error');
  }
  return true;
}

let nextId = 1;

/** Sends `tasks/stream` and reads it to its end, or until `stopAfter` events (then disconnects). */
export async function readDraftTaskStream(
  url: string,
  taskId: string,
  opts: DraftStreamOptions = {},
): Promise<DraftStreamRead> {
  const id = nextId++;
  const params = { taskId, ...(opts.after === undefined ? {} : { after: opts.after }) };
  const abort = new AbortController();
  const res = await fetch(url, {
    method: 'POST',
    signal: abort.signal,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': REVISION,
      'mcp-method': 'tasks/stream',
      'mcp-name': taskId,
      ...opts.headers,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'tasks/stream',
      params: {
        ...params,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': REVISION,
          'io.modelcontextprotocol/clientCapabilities': {
            extensions: { 'io.modelcontextprotocol/tasks': {} },
          },
          'io.modelcontextprotocol/clientInfo': { name: 'independent-event-reader', version: '0' },
        },
      },
    }),
  });
  const streamed = (res.headers.get('content-type') ?? '').includes('text/event-stream');
  const read: DraftStreamRead = { events: [], end: 'eof', violations: [], streamed };
  if (!streamed || res.body === null) {
    take(JSON.parse(await res.text()), id, taskId, read, opts.after);
    return read;
  }
  const parser = new EventStreamParser();
  const decoder = new TextDecoder();
  const reader = res.body.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return read;
    for (const sse of parser.feed(decoder.decode(value, { stream: true }))) {
      if (sse.event !== 'message') continue;
      if (take(JSON.parse(sse.data), id, taskId, read, opts.after)) {
        abort.abort();
        return read;
      }
      if (opts.stopAfter !== undefined && read.events.length >= opts.stopAfter) {
        read.end = 'stopped';
        abort.abort();
        await reader.cancel().catch(() => {});
        return read;
      }
    }
  }
}
