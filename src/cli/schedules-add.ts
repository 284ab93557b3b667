// `schedules add <name>`: a schedule stored in the database only (a tools module's are synced at start).
import { type Command, InvalidArgumentError, Option } from 'commander';
import type { JsonObject } from '../core/wire.ts';
import { checkSchedule } from '../launch/schedules/check.ts';
import { defineSchedule, OVERLAPS, type CatchUp } from '../launch/schedules/define.ts';
import { addSchedule } from '../launch/schedules/store.ts';
import { ToolRegistry } from '../tools/registry.ts';
import { loadToolsModule } from './load-tools.ts';
import { withDb } from './operator-db.ts';
import { print, printJson } from './operator-print.ts';

interface AddOptions {
  cron: string;
  tool: string;
  principal: string;
  timezone?: string;
  arguments?: JsonObject;
  overlap?: (typeof OVERLAPS)[number];
  catchUp?: CatchUp;
  tools?: string;
  json?: boolean;
}

function parseArguments(value: string): JsonObject {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new InvalidArgumentError('a JSON object');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new InvalidArgumentError('a JSON object');
  }
  return parsed as JsonObject;
}

function parseCatchUp(value: string): CatchUp {
  if (value === 'none' || value === 'latest') return value;
  const max = Number(value);
  if (!Number.isInteger(max) || max < 1 || max > 1000) {
    throw new InvalidArgumentError('none, latest, or how many missed ticks to run (1-1000)');
  }
  return { max };
}

export function addScheduleAddCommand(schedules: Command): void {
  schedules
    .command('add <name>')
    .description('store a schedule in the database (the running instances fire it from their next pass)')
    .requiredOption('--cron <expr>', '5 fields, or 6 with seconds first')
    .requiredOption('--tool <name>', 'the tool each tick calls')
    .requiredOption('--principal <name>', 'who owns the tasks it creates')
    .option('--timezone <zone>', 'IANA time zone the cron is read in (default UTC)')
    .addOption(new Option('--arguments <json>', "the tool's arguments").argParser(parseArguments))
    .addOption(
      new Option('--overlap <policy>', 'while the last run is active (default skip)').choices(OVERLAPS),
    )
    .addOption(
      new Option(
        '--catch-up <policy>',
        'ticks missed while down: none, latest (default), or a number',
      ).argParser(parseCatchUp),
    )
    .option('--tools <module>', "check the tool and arguments against this tools module's tools")
    .option('--json', 'print JSON')
    .action(async (name: string, opts: AddOptions) => {
      const schedule = defineSchedule({
        name,
        cron: opts.cron,
        tool: opts.tool,
        principal: opts.principal,
        ...(opts.timezone !== undefined && { timezone: opts.timezone }),
        ...(opts.arguments !== undefined && { arguments: opts.arguments }),
        ...(opts.overlap !== undefined && { overlap: opts.overlap }),
        ...(opts.catchUp !== undefined && { catchUp: opts.catchUp }),
      });
      if (opts.tools !== undefined) {
        const mod = await loadToolsModule(opts.tools);
        checkSchedule(schedule, new ToolRegistry(mod.tools), Number.POSITIVE_INFINITY);
      }
      const added = await withDb((db) => addSchedule(db, schedule));
      if (!added) throw new Error(`a schedule named ${name} exists`);
      if (opts.json === true) return printJson(schedule);
      print(`${name}: added\n`);
    });
}
