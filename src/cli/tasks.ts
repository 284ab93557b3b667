// `durable-mcp-tasks tasks list|show|cancel|purge|resume|fork`: the operator's view of every principal's
// tasks, straight from Postgres (DATABASE_URL, or this folder's embedded one). Tables for people, --json
// for scripts. Each verb is registered in its own file: tasks-list.ts, tasks-show.ts, tasks-cancel.ts,
// tasks-purge.ts; resume and fork in task-actions.ts.
import { Command } from 'commander';
import { addTaskActionCommands } from './task-actions.ts';
import { addCancelCommand } from './tasks-cancel.ts';
import { addListCommand } from './tasks-list.ts';
import { addPurgeCommand } from './tasks-purge.ts';
import { addShowCommand } from './tasks-show.ts';

export function addTasksCommand(program: Command): void {
  const tasks = new Command('tasks')
    .description("operate on every principal's tasks in Postgres (DATABASE_URL): list, show, cancel, purge")
    .addHelpText(
      'after',
      '\nReads DATABASE_URL. Exit status: 0 done, 1 no such task or a database error, 2 usage.\n' +
        "An id that starts with '-' (earlier versions made some) goes after --: tasks show -- -AbC…\n",
    );
  addListCommand(tasks);
  addShowCommand(tasks);
  addCancelCommand(tasks);
  addPurgeCommand(tasks);
  addTaskActionCommands(tasks);

  // Usage errors exit 2, like `call`.
  for (const cmd of [tasks, ...tasks.commands]) {
    cmd.exitOverride((err) => {
      process.exit(err.code === 'commander.helpDisplayed' || err.code === 'commander.help' ? 0 : 2);
    });
  }
  program.addCommand(tasks);
}
