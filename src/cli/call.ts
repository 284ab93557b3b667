// `durable-mcp-tasks call <tool>`: a small MCP client over fetch. It runs a tool as a task, shows its
// progress, asks the task's questions in the terminal, turns Ctrl-C into tasks/cancel and prints the result.
import { createInterface, type Interface } from 'node:readline/promises';
import { Command, InvalidArgumentError, Option } from 'commander';
import { TASKS_EXTENSION } from '../core/errors.ts';
import { META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, PROTOCOL_VERSION } from '../core/wire.ts';
import { PACKAGE_VERSION } from '../version.ts';

type Json = Record<string, unknown>;

/** Exit codes: 0 completed, 1 the tool failed, 2 usage or connection, 130 cancelled with Ctrl-C. */
export const EXIT = { ok: 0, failed: 1, usage: 2, interrupted: 130 } as const;

class CallError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

class RpcError extends CallError {
  constructor(
    readonly error: { code: number; message: string; data?: unknown },
    method: string,
  ) {
    // Invalid params (-32602) is the caller's mistake, like a usage error.
    super(`${method}: ${error.message} (${error.code})`, error.code === -32602 ? EXIT.usage : EXIT.failed);
  }
}

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The JSON-RPC response with `id` from a body that is either JSON or an SSE stream. */
function responseFrom(body: string, contentType: string, id: number): Json | undefined {
  if (!contentType.includes('text/event-stream')) {
    const parsed: unknown = JSON.parse(body);
    return isObject(parsed) ? parsed : undefined;
  }
  for (const event of body.split(/\r?\n\r?\n/)) {
    const data = event
      .split(/\r?\n/)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trimStart())
      .join('\n');
    if (data === '') continue;
    const msg: unknown = JSON.parse(data);
    if (isObject(msg) && msg.id === id) return msg;
  }
  return undefined;
}

interface ClientOptions {
  url: string;
  token?: string;
}

/** Stateless 2026-07-28 requests: routing headers, and the protocol version and capabilities in `_meta`. */
class Client {
  private nextId = 1;
  constructor(private readonly opts: ClientOptions) {}

  async request(method: string, name: string | undefined, params: Json): Promise<Json> {
    const id = this.nextId++;
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL_VERSION,
      'mcp-method': method,
      ...(name === undefined ? {} : { 'mcp-name': name }),
      ...(this.opts.token === undefined ? {} : { authorization: `Bearer ${this.opts.token}` }),
    };
    const meta = {
      [META_PROTOCOL_VERSION]: PROTOCOL_VERSION,
      [META_CLIENT_CAPABILITIES]: { extensions: { [TASKS_EXTENSION]: {} }, elicitation: { form: {} } },
      'io.modelcontextprotocol/clientInfo': { name: 'durable-mcp-tasks-cli', version: PACKAGE_VERSION },
    };
    let res: Response;
    try {
      res = await fetch(this.opts.url, {
        method: 'POST',
        headers,
        body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } }),
      });
    } catch (err) {
      const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message : String(err);
      throw new CallError(`cannot reach ${this.opts.url}: ${cause}`, EXIT.usage);
    }
    const body = await res.text();
    if (res.status === 401 || res.status === 403) {
      throw new CallError(
        this.opts.token === undefined
          ? `${this.opts.url} answered ${res.status}: pass a bearer token with --token or MCP_TOKEN`
          : `${this.opts.url} answered ${res.status}: it refused the token given (--token or MCP_TOKEN)`,
        EXIT.usage,
      );
    }
    let msg: Json | undefined;
    try {
      msg = responseFrom(body, res.headers.get('content-type') ?? '', id);
    } catch {
      msg = undefined;
    }
    if (msg === undefined) {
      throw new CallError(
        `${this.opts.url} answered HTTP ${res.status} without a JSON-RPC response: ${body.slice(0, 200)}`,
        res.status >= 500 ? EXIT.failed : EXIT.usage,
      );
    }
    if (isObject(msg.error)) {
      const e = msg.error;
      throw new RpcError(
        { code: Number(e.code), message: String(e.message), ...('data' in e ? { data: e.data } : {}) },
        method,
      );
    }
    if (!isObject(msg.result)) throw new CallError(`${method}: the response has no result`, EXIT.failed);
    return msg.result;
  }
}

// ---------- arguments ----------

/** `--arg k=v`, repeatable; collected into one object. */
function collectArg(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const eq = value.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError('expected key=value');
  return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) };
}

function parseArgsJson(value: string): Json {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new InvalidArgumentError('expected a JSON object');
  }
  if (!isObject(parsed)) throw new InvalidArgumentError('expected a JSON object');
  return parsed;
}

/** The JSON Schema types a property accepts (`type` may be a string or a list). */
function typesOf(schema: unknown): string[] {
  if (!isObject(schema)) return [];
  if (typeof schema.type === 'string') return [schema.type];
  if (Array.isArray(schema.type)) return schema.type.filter((t): t is string => typeof t === 'string');
  for (const key of ['anyOf', 'oneOf'] as const) {
    const alts = schema[key];
    if (Array.isArray(alts)) return alts.flatMap(typesOf);
  }
  return [];
}

/**
 * A `--arg` value as the tool's input schema wants it: kept as text for string properties, otherwise
 * read as JSON when it parses (numbers, booleans, arrays, objects), else text.
 */
export function coerceArg(raw: string, propertySchema: unknown): unknown {
  const types = typesOf(propertySchema);
  if (types.length === 1 && types[0] === 'string') return raw;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

async function inputSchemaOf(client: Client, tool: string): Promise<Json> {
  const names: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const result = await client.request('tools/list', undefined, cursor === undefined ? {} : { cursor });
    const tools = Array.isArray(result.tools) ? result.tools.filter(isObject) : [];
    for (const t of tools) {
      if (t.name === tool) return isObject(t.inputSchema) ? t.inputSchema : {};
      names.push(String(t.name));
    }
    if (typeof result.nextCursor !== 'string') break;
    cursor = result.nextCursor;
  }
  throw new CallError(`no tool named ${tool}; the server has: ${names.join(', ')}`, EXIT.usage);
}

// ---------- output ----------

interface Output {
  status(line: string): void;
  clear(): void;
}

const BAR_WIDTH = 24;

/** A progress bar from a "k/n" in the status message, when there is one. */
export function progressBar(message: string | undefined): string | undefined {
  const m = /(\d+)\s*\/\s*(\d+)/.exec(message ?? '');
  if (m === null) return undefined;
  const [done, total] = [Number(m[1]), Number(m[2])];
  if (total <= 0 || done > total) return undefined;
  const filled = Math.round((done / total) * BAR_WIDTH);
  return `[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${Math.round((done / total) * 100)}%`;
}

/** On a terminal one line redrawn in place on stderr; otherwise a plain line per change. */
function createOutput(tty: boolean, stream: NodeJS.WriteStream): Output {
  if (!tty) {
    let last = '';
    return {
      status(line) {
        if (line === last) return;
        last = line;
        stream.write(`${line}\n`);
      },
      clear() {},
    };
  }
  let shown = false;
  return {
    status(line) {
      const width = Math.max(20, (stream.columns || 80) - 1);
      stream.write(`\r\x1b[2K${line.length > width ? `${line.slice(0, width - 1)}…` : line}`);
      shown = true;
    },
    clear() {
      if (shown) stream.write('\r\x1b[2K');
      shown = false;
    },
  };
}

function describeStatus(tool: string, task: Json, started: number, tty: boolean): string {
  const status = String(task.status);
  const message = typeof task.statusMessage === 'string' ? task.statusMessage : undefined;
  const seconds = `${((Date.now() - started) / 1000).toFixed(1)}s`;
  if (!tty) return `${status}${message === undefined ? '' : `: ${message}`}`;
  const bar = status === 'working' ? progressBar(message) : undefined;
  return [tool, bar, status === 'working' ? undefined : status, message, seconds]
    .filter((p) => p !== undefined)
    .join('  ');
}

/** The text of a CallToolResult's content, one block per line; other blocks as JSON. */
export function resultText(result: Json): string {
  const content = Array.isArray(result.content) ? result.content.filter(isObject) : [];
  const lines = content.map((block) =>
    block.type === 'text' && typeof block.text === 'string' ? block.text : JSON.stringify(block),
  );
  if (lines.length === 0 && result.structuredContent !== undefined)
    lines.push(JSON.stringify(result.structuredContent));
  return lines.join('\n');
}

// ---------- elicitation in the terminal ----------

interface Asker {
  ask(question: string): Promise<string | undefined>;
  close(): void;
}

/**
 * Line prompts on stdin/stderr; `undefined` once stdin has ended or the user interrupted (then every
 * question is declined).
 */
function createAsker(interrupt: AbortSignal, onInterrupt: () => void): Asker {
  let rl: Interface | undefined;
  let ended = false;
  const lines: string[] = [];
  const waiting: ((line: string | undefined) => void)[] = [];
  interrupt.addEventListener('abort', () => {
    for (const w of waiting.splice(0)) w(undefined);
  });
  const open = (): Interface => {
    if (rl !== undefined) return rl;
    const created = createInterface({
      input: process.stdin,
      output: process.stderr,
      terminal: process.stdin.isTTY,
    });
    created.on('line', (line) => {
      const w = waiting.shift();
      if (w === undefined) lines.push(line);
      else w(line);
    });
    created.on('close', () => {
      ended = true;
      for (const w of waiting.splice(0)) w(undefined);
    });
    // In raw mode Ctrl-C reaches readline, not the process: it still means "cancel the task".
    created.on('SIGINT', onInterrupt);
    rl = created;
    return created;
  };
  return {
    ask(question) {
      const r = open();
      process.stderr.write(question);
      // Without a terminal the answer is not echoed: end the prompt's line once it is read.
      const echo = (line: string | undefined) => {
        if (!process.stdin.isTTY) process.stderr.write('\n');
        return line;
      };
      const queued = lines.shift();
      if (queued !== undefined) return Promise.resolve(echo(queued));
      if (ended || interrupt.aborted) return Promise.resolve(echo(undefined));
      r.resume();
      return new Promise<string | undefined>((resolve) => waiting.push(resolve)).then(echo);
    },
    close() {
      rl?.close();
    },
  };
}

type Answer = { action: 'accept'; content: Json } | { action: 'decline' } | { action: 'cancel' };

function fieldHint(schema: Json): string {
  const choices = Array.isArray(schema.enum)
    ? schema.enum
    : isObject(schema.items) && Array.isArray(schema.items.enum)
      ? schema.items.enum
      : undefined;
  const types = typesOf(schema);
  if (choices !== undefined)
    return ` (${choices.map(String).join('/')}${types[0] === 'array' ? ', comma-separated' : ''})`;
  if (types.includes('boolean')) return ' (y/n)';
  if (types.includes('integer') || types.includes('number')) return ' (a number)';
  return '';
}

/** One answer as the field's schema types it, or an error message to ask again with. */
export function parseField(raw: string, schema: Json): { value: unknown } | { problem: string } {
  const types = typesOf(schema);
  const text = raw.trim();
  if (types.includes('boolean')) {
    if (/^(y|yes|true)$/i.test(text)) return { value: true };
    if (/^(n|no|false)$/i.test(text)) return { value: false };
    return { problem: 'answer y or n' };
  }
  if (types.includes('integer') || types.includes('number')) {
    const n = Number(text);
    if (text === '' || !Number.isFinite(n)) return { problem: 'answer a number' };
    if (types.includes('integer') && !types.includes('number') && !Number.isInteger(n))
      return { problem: 'answer a whole number' };
    return { value: n };
  }
  if (types.includes('array')) {
    const items = text
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    const allowed =
      isObject(schema.items) && Array.isArray(schema.items.enum) ? schema.items.enum : undefined;
    const bad = allowed === undefined ? undefined : items.find((i) => !allowed.includes(i));
    return bad === undefined ? { value: items } : { problem: `${bad} is not one of ${allowed?.join(', ')}` };
  }
  if (Array.isArray(schema.enum) && !schema.enum.includes(text))
    return { problem: `answer one of ${schema.enum.join(', ')}` };
  return { value: text };
}

/**
 * A form elicitation asked field by field. An empty answer leaves an optional field out (or takes its
 * default); end of input declines.
 */
async function askForm(asker: Asker, params: Json): Promise<Answer> {
  process.stderr.write(
    `? ${typeof params.message === 'string' ? params.message : 'The task asks for input'}\n`,
  );
  const schema = isObject(params.requestedSchema) ? params.requestedSchema : {};
  const properties = isObject(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required.map(String) : []);
  const content: Json = {};
  for (const [key, raw] of Object.entries(properties)) {
    const field = isObject(raw) ? raw : {};
    const label = typeof field.title === 'string' ? field.title : key;
    const def = field.default === undefined ? '' : ` [${JSON.stringify(field.default)}]`;
    for (;;) {
      const answer = await asker.ask(`  ${label}${fieldHint(field)}${def}: `);
      if (answer === undefined) return { action: 'decline' };
      if (answer.trim() === '') {
        if (field.default !== undefined) content[key] = field.default;
        if (field.default !== undefined || !required.has(key)) break;
        process.stderr.write('    an answer is required\n');
        continue;
      }
      const parsed = parseField(answer, field);
      if ('value' in parsed) {
        content[key] = parsed.value;
        break;
      }
      process.stderr.write(`    ${parsed.problem}\n`);
    }
  }
  return { action: 'accept', content };
}

async function answerAll(asker: Asker, requests: Json): Promise<Json> {
  const responses: Json = {};
  for (const [key, request] of Object.entries(requests)) {
    if (!isObject(request)) continue;
    const params = isObject(request.params) ? request.params : {};
    if (request.method === 'elicitation/create' && (params.mode === undefined || params.mode === 'form')) {
      responses[key] = await askForm(asker, params);
    } else {
      process.stderr.write(
        `the task asks for ${String(request.method)}, which this client does not support\n`,
      );
      responses[key] = { action: 'decline' };
    }
  }
  return responses;
}

// ---------- the call ----------

export interface CallOptions {
  url?: string;
  token?: string;
  arg?: Record<string, string>;
  args?: Json;
  json?: boolean;
}

interface Outcome {
  status: 'completed' | 'failed' | 'cancelled';
  taskId?: string;
  result?: Json;
  error?: Json;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
/** Polls survive a restarting server or load balancer this long: the task itself is durable. */
const RECONNECT_MS = 60_000;

async function run(
  tool: string,
  opts: CallOptions,
  output: Output,
  interrupt: AbortSignal,
): Promise<Outcome> {
  const url = opts.url ?? `http://127.0.0.1:${process.env.PORT ?? '3000'}/mcp`;
  const token = opts.token ?? process.env.MCP_TOKEN;
  const client = new Client({ url, ...(token ? { token } : {}) });
  const tty = process.stderr.isTTY;
  const asker = createAsker(interrupt, () => process.emit('SIGINT'));
  try {
    const args: Json = { ...opts.args };
    if (opts.arg !== undefined && Object.keys(opts.arg).length > 0) {
      const schema = await inputSchemaOf(client, tool);
      const properties = isObject(schema.properties) ? schema.properties : {};
      for (const [k, v] of Object.entries(opts.arg)) args[k] = coerceArg(v, properties[k]);
    }
    // A tool that runs synchronously may ask for input in rounds (MRTR) before it answers.
    let extra: Json = {};
    let first: Json;
    for (;;) {
      first = await client.request('tools/call', tool, { name: tool, arguments: args, ...extra });
      if (first.resultType !== 'input_required') break;
      const inputResponses = await answerAll(asker, isObject(first.inputRequests) ? first.inputRequests : {});
      extra = {
        inputResponses,
        ...(first.requestState === undefined ? {} : { requestState: first.requestState }),
      };
    }
    if (first.resultType !== 'task') {
      return { status: first.isError === true ? 'failed' : 'completed', result: first };
    }
    const taskId = String(first.taskId);
    const started = Date.now();
    let task: Json = first;
    let answered = '';
    let cancelSent = false;
    let lostSince: number | undefined;
    for (;;) {
      if (interrupt.aborted && !cancelSent) {
        cancelSent = true;
        output.clear();
        process.stderr.write(`cancelling task ${taskId}…\n`);
        await client.request('tasks/cancel', taskId, { taskId }).catch(() => undefined);
      }
      output.status(describeStatus(tool, task, started, tty));
      if (TERMINAL.has(String(task.status))) break;
      if (task.status === 'input_required' && isObject(task.inputRequests) && !cancelSent) {
        const keys = Object.keys(task.inputRequests).sort().join(',');
        if (keys !== answered) {
          output.clear();
          const inputResponses = await answerAll(asker, task.inputRequests);
          if (!interrupt.aborted) {
            await client.request('tasks/update', taskId, { taskId, inputResponses });
            answered = keys;
          }
          continue;
        }
      }
      await Promise.race([
        sleep(Math.max(20, Number(task.pollIntervalMs) || 1000)),
        new Promise((resolve) => interrupt.addEventListener('abort', resolve, { once: true })),
      ]);
      try {
        task = await client.request('tasks/get', taskId, { taskId });
        lostSince = undefined;
      } catch (err) {
        // An unreachable or restarting server: keep polling for a while, the task is in Postgres.
        if (!(err instanceof CallError) || err instanceof RpcError) throw err;
        lostSince ??= Date.now();
        if (Date.now() - lostSince > RECONNECT_MS) throw err;
        output.status(`${tool}  ${err.message}; retrying`);
      }
    }
    output.clear();
    const status = String(task.status) as Outcome['status'];
    return {
      status:
        status === 'completed' && isObject(task.result) && task.result.isError === true ? 'failed' : status,
      taskId,
      ...(isObject(task.result) ? { result: task.result } : {}),
      ...(isObject(task.error) ? { error: task.error } : {}),
    };
  } finally {
    asker.close();
  }
}

async function callAction(tool: string, opts: CallOptions): Promise<void> {
  const output = createOutput(process.stderr.isTTY, process.stderr);
  const interrupt = new AbortController();
  let interrupts = 0;
  const onSigint = () => {
    interrupts++;
    // The first Ctrl-C cancels the task and waits for it to stop; the second leaves at once.
    if (interrupts > 1) process.exit(EXIT.interrupted);
    interrupt.abort();
  };
  process.on('SIGINT', onSigint);
  let outcome: Outcome;
  try {
    outcome = await run(tool, opts, output, interrupt.signal);
  } catch (err) {
    output.clear();
    const code = err instanceof CallError ? err.exitCode : EXIT.failed;
    process.stderr.write(`durable-mcp-tasks call: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = code;
    return;
  } finally {
    process.off('SIGINT', onSigint);
  }
  if (opts.json === true) {
    process.stdout.write(`${JSON.stringify(outcome)}\n`);
  } else if (outcome.result !== undefined) {
    const text = resultText(outcome.result);
    if (text !== '') process.stdout.write(`${text}\n`);
  }
  if (outcome.error !== undefined && opts.json !== true) {
    process.stderr.write(`failed: ${String(outcome.error.message)} (${String(outcome.error.code)})\n`);
  }
  if (outcome.status === 'cancelled' && opts.json !== true) process.stderr.write('cancelled\n');
  process.exitCode =
    outcome.status === 'completed'
      ? EXIT.ok
      : outcome.status === 'cancelled' && interrupt.signal.aborted
        ? EXIT.interrupted
        : EXIT.failed;
}

export function addCallCommand(program: Command): void {
  program.addCommand(
    new Command('call')
      .argument('<tool>', 'the tool to run')
      .description(
        'run a tool as a task: live progress, questions asked in the terminal, Ctrl-C cancels the task',
      )
      .addOption(
        new Option(
          '--arg <key=value>',
          'a tool argument, repeatable; read as JSON unless the schema says string',
        ).argParser(collectArg),
      )
      .addOption(new Option('--args <json>', 'all arguments as one JSON object').argParser(parseArgsJson))
      .addOption(
        new Option('--url <url>', 'the MCP endpoint').default(
          undefined,
          'http://127.0.0.1:$PORT/mcp (PORT 3000)',
        ),
      )
      .addOption(new Option('--token <token>', 'a bearer token').env('MCP_TOKEN'))
      .addOption(
        new Option('--json', 'print the outcome as one JSON object (status, taskId, result or error)'),
      )
      .addHelpText(
        'after',
        '\nExit status: 0 completed, 1 failed (or the result isError), 2 usage or connection, 130 cancelled with Ctrl-C.\n' +
          'Questions are asked on stderr and read from stdin; when stdin ends they are declined.\n',
      )
      // A bad flag is a usage error: exit 2, like an unknown tool (commander's default is 1).
      .exitOverride((err) => {
        process.exit(
          err.code === 'commander.helpDisplayed' || err.code === 'commander.version' ? 0 : EXIT.usage,
        );
      })
      .action(callAction),
  );
}
