// `durable-mcp-tasks call <tool>`: runs a tool as a task with the client library: live progress and
// events (call-events.ts), the task's questions asked in the terminal, Ctrl-C as tasks/cancel. Every
// task it creates is recorded in a local state folder first, its id printed at once: `--resume [ID]`
// follows it again after the terminal (or the machine) went away, `--list` shows this client's tasks.
import { Command, InvalidArgumentError, Option } from 'commander';
import {
  defaultStateDir,
  FileTaskStore,
  McpAuthError,
  McpConnectionError,
  McpRpcError,
  TasksClient,
  type TaskRecord,
  type ToolOutcome,
  type WatchOptions,
} from '../client/index.ts';
import { PACKAGE_VERSION } from '../version.ts';
import { printTaskEvents, type EventPrinter } from './call-events.ts';
import { answerAll, createAsker, typesOf } from './terminal-input.ts';
import { createOutput, describeStatus, resultText } from './terminal-output.ts';
import { unknownArgumentsLine } from './unknown-arguments.ts';
import { isJsonObject } from '../core/wire.ts';

export { parseField } from './terminal-input.ts';
export { progressBar, resultText } from './terminal-output.ts';

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
  if (!isJsonObject(parsed)) throw new InvalidArgumentError('expected a JSON object');
  return parsed;
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

async function inputSchemaOf(client: TasksClient, tool: string): Promise<Json> {
  const names: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const result = await client.http.request('tools/list', cursor === undefined ? {} : { cursor });
    const tools = Array.isArray(result.tools) ? result.tools.filter(isJsonObject) : [];
    for (const t of tools) {
      if (t.name === tool) return isJsonObject(t.inputSchema) ? t.inputSchema : {};
      names.push(String(t.name));
    }
    if (typeof result.nextCursor !== 'string') break;
    cursor = result.nextCursor;
  }
  throw new CallError(`no tool named ${tool}; the server has: ${names.join(', ')}`, EXIT.usage);
}

/** `--args` and `--arg`, read as the tool's input schema says; one the tool does not take is refused. */
async function argumentsOf(client: TasksClient, tool: string, opts: CallOptions): Promise<Json> {
  const args: Json = { ...opts.args };
  const given = Object.entries(opts.arg ?? {});
  if (given.length === 0 && Object.keys(args).length === 0) return args;
  const schema = await inputSchemaOf(client, tool);
  const properties = isJsonObject(schema.properties) ? schema.properties : {};
  for (const [k, v] of given) args[k] = coerceArg(v, properties[k]);
  const unknown = unknownArgumentsLine(tool, schema, args);
  if (unknown !== undefined) throw new CallError(unknown, EXIT.usage);
  return args;
}

// ---------- the client ----------

export interface CallOptions {
  url?: string;
  token?: string;
  arg?: Record<string, string>;
  args?: Json;
  json?: boolean;
  stateDir?: string;
  resume?: string | true;
  list?: boolean;
}

function clientOf(opts: CallOptions): TasksClient {
  const token = opts.token ?? process.env.MCP_TOKEN;
  return new TasksClient({
    url: opts.url ?? `http://127.0.0.1:${process.env.PORT ?? '3000'}/mcp`,
    ...(token ? { token } : {}),
    clientInfo: { name: 'durable-mcp-tasks-cli', version: PACKAGE_VERSION },
    capabilities: { elicitation: { form: {} } },
    store: new FileTaskStore(opts.stateDir ?? defaultStateDir()),
  });
}

/** A library error as one line and an exit code. */
function failureOf(err: unknown, client: TasksClient): CallError {
  if (err instanceof CallError) return err;
  if (err instanceof McpAuthError) {
    const refused = client.http.sendsToken
      ? 'it refused the token given (--token or MCP_TOKEN)'
      : 'pass a bearer token with --token or MCP_TOKEN';
    return new CallError(`${client.url} answered ${err.status}: ${refused}`, EXIT.usage);
  }
  if (err instanceof McpConnectionError) return new CallError(err.message, EXIT.usage);
  // Invalid params (-32602) is the caller's mistake, like a usage error.
  if (err instanceof McpRpcError)
    return new CallError(err.message, err.code === -32602 ? EXIT.usage : EXIT.failed);
  return new CallError(err instanceof Error ? err.message : String(err), EXIT.failed);
}

// ---------- following a call or a task in the terminal ----------

const resumeHint = (taskId: string) => `durable-mcp-tasks call --resume ${taskId}`;

/**
 * Runs `follow` with the terminal: a status line, questions asked on stderr, the task's id printed as
 * soon as it exists, then its events on stdout as they come (not with `--json`: stdout is one JSON
 * object then). The first Ctrl-C cancels the task and waits for it to stop; the second leaves.
 */
async function inTerminal(
  client: TasksClient,
  tool: string,
  opts: CallOptions,
  follow: (watch: WatchOptions & { onTask: (r: TaskRecord) => void }) => Promise<ToolOutcome>,
): Promise<void> {
  const tty = process.stderr.isTTY;
  const output = createOutput(tty, process.stderr);
  const interrupt = new AbortController();
  let interrupts = 0;
  const onSigint = () => {
    if (++interrupts > 1) process.exit(EXIT.interrupted);
    interrupt.abort();
  };
  process.on('SIGINT', onSigint);
  const asker = createAsker(interrupt.signal, () => process.emit('SIGINT'));
  const started = Date.now();
  const onStatus: WatchOptions['onStatus'] = (task) =>
    output.status(describeStatus(tool, task, started, tty));
  let taskId: string | undefined;
  let events: EventPrinter | undefined;
  let outcome: ToolOutcome;
  try {
    outcome = await follow({
      onStatus,
      onInput: async (requests) => {
        output.clear();
        return answerAll(asker, requests);
      },
      signal: interrupt.signal,
      onTask: (record) => {
        taskId = record.taskId;
        output.clear();
        process.stderr.write(
          `task ${record.taskId} (if this stops, follow it again: ${resumeHint(record.taskId)})\n`,
        );
        if (opts.json !== true) events = printTaskEvents(client, record.taskId, output);
      },
    });
  } catch (err) {
    output.clear();
    if (!interrupt.signal.aborted || taskId === undefined) {
      events?.stop();
      const failure = interrupt.signal.aborted
        ? new CallError('interrupted', EXIT.interrupted)
        : failureOf(err, client);
      process.stderr.write(`durable-mcp-tasks call: ${failure.message}\n`);
      process.exitCode = failure.exitCode;
      return;
    }
    process.stderr.write(`cancelling task ${taskId}…\n`);
    outcome = await cancelAndWait(client, taskId, onStatus);
  } finally {
    process.off('SIGINT', onSigint);
    asker.close();
  }
  // The task's last events come before its result.
  await events?.finish();
  output.clear();
  report(outcome, opts, interrupt.signal.aborted);
  await client.prune().catch(() => 0);
}

async function cancelAndWait(
  client: TasksClient,
  taskId: string,
  onStatus: WatchOptions['onStatus'],
): Promise<ToolOutcome> {
  try {
    await client.cancel(taskId);
  } catch {
    // Already ending: the task's own outcome follows.
  }
  return client.resume(taskId, { ...(onStatus === undefined ? {} : { onStatus }) });
}

/** Prints the outcome (the result on stdout) and sets the exit code. */
function report(outcome: ToolOutcome, opts: CallOptions, interrupted: boolean): void {
  const failed = outcome.status === 'failed' || outcome.result?.isError === true;
  if (opts.json === true) {
    process.stdout.write(`${JSON.stringify({ ...outcome, status: failed ? 'failed' : outcome.status })}\n`);
  } else {
    if (outcome.result !== undefined) {
      const text = resultText(outcome.result);
      if (text !== '') process.stdout.write(`${text}\n`);
    }
    if (outcome.error !== undefined) {
      process.stderr.write(`failed: ${String(outcome.error.message)} (${String(outcome.error.code)})\n`);
    }
    if (outcome.status === 'cancelled') process.stderr.write('cancelled\n');
  }
  process.exitCode =
    outcome.status === 'cancelled'
      ? interrupted
        ? EXIT.interrupted
        : EXIT.failed
      : failed
        ? EXIT.failed
        : EXIT.ok;
}

// ---------- the actions ----------

async function callAction(tool: string | undefined, opts: CallOptions): Promise<void> {
  const client = clientOf(opts);
  if (opts.list === true) return listAction(client, opts);
  if (opts.resume !== undefined) return resumeAction(client, opts.resume, opts);
  if (tool === undefined) {
    process.stderr.write('durable-mcp-tasks call: name a tool, or use --resume or --list\n');
    process.exitCode = EXIT.usage;
    return;
  }
  let args: Json;
  try {
    args = await argumentsOf(client, tool, opts);
  } catch (err) {
    const failure = failureOf(err, client);
    process.stderr.write(`durable-mcp-tasks call: ${failure.message}\n`);
    process.exitCode = failure.exitCode;
    return;
  }
  await inTerminal(client, tool, opts, (watch) => client.callTool(tool, args, watch));
}

/** `--resume [ID]`: the task named, or this client's newest task whose outcome it has not shown. */
async function resumeAction(client: TasksClient, resume: string | true, opts: CallOptions): Promise<void> {
  const taskId = resume === true ? (await client.pending())[0]?.taskId : resume;
  if (taskId === undefined) {
    process.stderr.write(
      `durable-mcp-tasks call: no unfinished task of ${client.url} in ${opts.stateDir ?? defaultStateDir()}; see call --list\n`,
    );
    process.exitCode = EXIT.usage;
    return;
  }
  const record = await client.store.load(client.url, taskId);
  await inTerminal(client, record?.tool || 'task', opts, (watch) => {
    watch.onTask({ ...(record ?? { taskId }), taskId } as TaskRecord);
    return client.resume(taskId, watch);
  });
}

/** `--list`: this client's tasks on the server, their status read again now. */
async function listAction(client: TasksClient, opts: CallOptions): Promise<void> {
  await client.prune();
  let records: TaskRecord[];
  let note = '';
  try {
    records = await client.records({ refresh: true });
  } catch (err) {
    records = await client.records();
    note = `(last known status: ${failureOf(err, client).message})`;
  }
  if (opts.json === true) {
    process.stdout.write(`${JSON.stringify(records)}\n`);
    return;
  }
  if (records.length === 0) {
    process.stderr.write(`no tasks of ${client.url} recorded in ${opts.stateDir ?? defaultStateDir()}\n`);
    return;
  }
  const rows = records.map((r) => [
    r.taskId,
    r.tool || '?',
    r.status,
    r.createdAt.replace('T', ' ').slice(0, 19),
    r.statusMessage ?? '',
  ]);
  const header = ['TASK', 'TOOL', 'STATUS', 'CREATED', 'MESSAGE'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  for (const row of [header, ...rows]) {
    process.stdout.write(
      `${row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd()}\n`,
    );
  }
  if (note !== '') process.stderr.write(`${note}\n`);
}

export function addCallCommand(program: Command): void {
  program.addCommand(
    new Command('call')
      .argument('[tool]', 'the tool to run')
      .description(
        'run a tool as a task: live progress and events (partial output on stdout), questions asked in the ' +
          'terminal, Ctrl-C cancels the task; every task is recorded, so --resume finds it again',
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
        new Option(
          '--json',
          'print the outcome as one JSON object (status, taskId, result or error), and no events',
        ),
      )
      .addOption(
        new Option(
          '--resume [id]',
          "follow a task again (progress, the events not printed yet, questions, result); without an id, this client's newest unfinished one",
        ),
      )
      .addOption(new Option('--list', "list this client's tasks on the server with their status now"))
      .addOption(
        new Option('--state-dir <dir>', 'where task records are kept')
          .env('DURABLE_MCP_TASKS_STATE_DIR')
          .default(undefined, '$XDG_STATE_HOME/durable-mcp-tasks or ~/.local/state/durable-mcp-tasks'),
      )
      .addHelpText(
        'after',
        '\nExit status: 0 completed, 1 failed (or the result isError), 2 usage or connection, 130 cancelled with Ctrl-C.\n' +
          'Questions are asked on stderr and read from stdin; when stdin ends they are declined.\n' +
          'A task is recorded before its id is printed; a record goes once its result was shown and its TTL passed.\n',
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
