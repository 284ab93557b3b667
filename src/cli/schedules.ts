// `durable-mcp-tasks schedules list|add|pause|resume|remove|run-now`: the schedules in Postgres
// (DATABASE_URL). Those a tools module declares (defineSchedule) are synced from it at each start; `add`
// stores one in the database only. Tables for people, --json for scripts.
import { Command } from 'commander';
import { listSchedules, type ScheduleStatus } from '../launch/schedules/list.ts';
import {
  pauseSchedule,
  removeSchedule,
  requestScheduleRun,
  resumeSchedule,
} from '../launch/schedules/store.ts';
import type { Db } from '../db/database.ts';
import { withDb } from './operator-db.ts';
import { print, printJson } from './operator-print.ts';
import { table } from './operator-text.ts';
import { addScheduleAddCommand } from './schedules-add.ts';

function listRows(list: ScheduleStatus[]): string {
  return table(
    ['NAME', 'STATE', 'CRON', 'ZONE', 'TOOL', 'NEXT', 'LAG', 'LAST TASK', 'LAST STATUS', 'ERROR'],
    list.map((s) => [
      s.name,
      s.paused ? 'paused' : s.runRequested ? 'run requested' : 'active',
      s.cron,
      s.timezone,
      s.tool,
      s.paused ? '-' : s.nextFireAt.toISOString(),
      `${Math.round(s.lagSeconds)}s`,
      s.lastTaskId ?? '-',
      s.lastTaskStatus ?? '-',
      (s.lastError ?? '').slice(0, 60),
    ]),
  );
}

/** A verb on one schedule by name: exit 1 when there is none. */
function byName(
  verb: string,
  description: string,
  act: (db: Db, name: string) => Promise<boolean>,
  done: string,
): Command {
  return new Command(verb)
    .argument('<name>')
    .description(description)
    .option('--json', 'print JSON')
    .action(async (name: string, opts: { json?: boolean }) => {
      const found = await withDb((db) => act(db, name));
      if (!found) throw new Error(`no schedule ${name}`);
      if (opts.json === true) return printJson({ name, [verb]: true });
      print(`${name}: ${done}\n`);
    });
}

export function addSchedulesCommand(program: Command): void {
  const schedules = new Command('schedules')
    .description('list and manage schedules (defineSchedule, or added here) in Postgres (DATABASE_URL)')
    .addHelpText(
      'after',
      '\nReads DATABASE_URL. Exit status: 0 done, 1 no such schedule or a database error, 2 usage.\n' +
        "A tools module's schedules come back (unpaused ones as declared) at the next start; pause them instead.\n",
    );
  schedules
    .command('list')
    .description('every schedule: next tick, lag, last task')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const list = await withDb((db) => listSchedules(db));
      if (opts.json === true) return printJson(list);
      print(list.length === 0 ? 'no schedules\n' : listRows(list));
    });
  addScheduleAddCommand(schedules);
  schedules.addCommand(byName('pause', 'fire no tick until resumed', pauseSchedule, 'paused'));
  schedules.addCommand(
    byName(
      'resume',
      'fire again from the next tick (ticks while paused are not caught up)',
      (db, n) => resumeSchedule(db, n),
      'resumed',
    ),
  );
  schedules.addCommand(byName('remove', 'delete the schedule (its tasks stay)', removeSchedule, 'removed'));
  schedules.addCommand(
    byName(
      'run-now',
      'one run at the next pass of any instance, whatever the clock and overlap say',
      requestScheduleRun,
      'run requested; the next pass of a running instance creates its task',
    ),
  );
  for (const cmd of [schedules, ...schedules.commands]) {
    cmd.exitOverride((err) => {
      process.exit(err.code === 'commander.helpDisplayed' || err.code === 'commander.help' ? 0 : 2);
    });
  }
  program.addCommand(schedules);
}
