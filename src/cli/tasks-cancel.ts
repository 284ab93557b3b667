// `tasks cancel <taskId>`: cancel any principal's task, as its owner would with tasks/cancel.
import type { Command } from 'commander';
import { TaskNotFoundError } from '../tasks/errors.ts';
import { adminCancelTask } from '../tasks/store/admin.ts';
import { cliActor, withDb } from './operator-db.ts';
import { print, printJson } from './operator-print.ts';

export function addCancelCommand(tasks: Command): void {
  tasks
    .command('cancel <taskId>')
    .description(
      "cancel as tasks/cancel does: at once when no worker holds it, else the handler's signal fires",
    )
    .option('--json', 'print JSON')
    .action(async (taskId: string, opts: { json?: boolean }) => {
      const outcome = await withDb((db) => adminCancelTask(db, taskId, cliActor())).catch((err: unknown) => {
        throw err instanceof TaskNotFoundError ? new Error(`no task ${taskId}`) : err;
      });
      if (opts.json === true) return printJson({ taskId, ...outcome });
      print(
        outcome.cancelledNow
          ? `${taskId}: cancelled\n`
          : outcome.status === 'working'
            ? `${taskId}: cancel requested; the worker running it stops at its next check\n`
            : `${taskId}: already ${outcome.status}\n`,
      );
    });
}
