import { Command, InvalidArgumentError, Option } from 'commander';
import { describeSettings } from '../config.ts';
import { PACKAGE_VERSION } from '../version.ts';
import { addCallCommand } from './call.ts';
import { addSchedulesCommand } from './schedules.ts';
import { addTasksCommand } from './tasks.ts';
import { migrate, serve, type ServeOptions } from './serve.ts';

export const BIN = 'durable-mcp-tasks';

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65_535) throw new InvalidArgumentError('a port number (0-65535)');
  return n;
}

/** Every environment variable with its default, for `--help`. */
export function environmentHelp(): string {
  const rows = describeSettings().map((s) => {
    const def = s.default === undefined ? '(unset)' : JSON.stringify(s.default);
    return `  ${s.name.padEnd(34)} default ${def}\n      ${s.description}`;
  });
  return (
    `\nEnvironment (flags win over it):\n${rows.join('\n')}\n` +
    `\nTracing (OpenTelemetry, off unless an exporter is set): the standard OTEL_* variables, e.g.\n` +
    `  OTEL_EXPORTER_OTLP_ENDPOINT (OTLP/HTTP), OTEL_TRACES_EXPORTER (otlp|console|none), OTEL_SERVICE_NAME,\n` +
    `  OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_SCHEDULE_DELAY; see docs/operations.md#tracing.\n`
  );
}

function serveCommand(
  name: string,
  description: string,
  run: (opts: ServeOptions) => Promise<void>,
): Command {
  return new Command(name)
    .description(description)
    .addOption(
      new Option(
        '--tools <module>',
        'a module exporting tools (and resources, prompts): .js, or .ts without a build',
      ),
    )
    .addOption(new Option('--port <port>', 'HTTP port (env PORT)').argParser(port))
    .addOption(new Option('--host <host>', 'HTTP bind address (env HOST)'))
    .addHelpText('after', environmentHelp)
    .action(run);
}

/** The `durable-mcp-tasks` command line. */
export function buildProgram(): Command {
  const program = new Command(BIN)
    .description('A durable MCP server for the io.modelcontextprotocol/tasks extension, on Postgres.')
    .version(PACKAGE_VERSION)
    .showHelpAfterError()
    .addHelpText('after', environmentHelp);
  program.addCommand(
    serveCommand(
      'start',
      'HTTP server and workers in one process; an embedded Postgres when DATABASE_URL is unset',
      (opts) => serve('all', opts),
    ),
  );
  program.addCommand(
    serveCommand('server', 'HTTP instances only (scale behind a load balancer)', (opts) =>
      serve('server', opts),
    ),
  );
  program.addCommand(
    serveCommand('worker', 'the worker pool only: runs tasks, sweeps expired ones', (opts) =>
      serve('worker', opts),
    ),
  );
  program.addCommand(
    new Command('migrate')
      .description(
        "migrate the database (our schema and pg-boss's) and exit; DB_APP_ROLE gets the runtime grants",
      )
      .addHelpText('after', environmentHelp)
      .action(() => migrate()),
  );
  addCallCommand(program);
  addTasksCommand(program);
  addSchedulesCommand(program);
  return program;
}

/** Runs the command line (`argv` as `process.argv`). */
export async function runCli(argv: readonly string[] = process.argv): Promise<void> {
  await buildProgram().parseAsync([...argv]);
}
