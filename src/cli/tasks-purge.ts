// `tasks purge --older-than <duration>`: delete finished tasks nobody touched for a while.
import { type Command, Option } from 'commander';
import { adminPurgeTasks } from '../tasks/store/admin.ts';
import { withDb } from './operator-db.ts';
import { print, printJson } from './operator-print.ts';
import { parseDuration } from './operator-text.ts';
import { parseStatuses } from './tasks-list.ts';

interface PurgeOptions {
  olderThan: number;
  status?: string[];
  dryRun?: boolean;
  json?: boolean;
}

export function addPurgeCommand(tasks: Command): void {
  tasks
    .command('purge')
    .description(
      'delete finished tasks (completed, failed, cancelled) not updated for a while; never active ones',
    )
    .addOption(
      new Option('--older-than <duration>', 'last updated at least this long ago (90s, 15m, 2h, 7d)')
        .argParser(parseDuration)
        .makeOptionMandatory(),
    )
    .addOption(new Option('--status <list>', 'only these finished statuses').argParser(parseStatuses))
    .option('--dry-run', 'count, delete nothing')
    .option('--json', 'print JSON')
    .action(async (opts: PurgeOptions) => {
      const n = await withDb((db) =>
        adminPurgeTasks(db, {
          olderThanMs: opts.olderThan,
          ...(opts.status === undefined ? {} : { status: opts.status }),
          dryRun: opts.dryRun === true,
        }),
      );
      if (opts.json === true) return printJson({ [opts.dryRun === true ? 'wouldDelete' : 'deleted']: n });
      print(opts.dryRun === true ? `would delete ${n} tasks\n` : `deleted ${n} tasks\n`);
    });
}
