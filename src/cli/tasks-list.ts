// `tasks list`: every principal's tasks, newest first, filtered by status, tool, principal and age.
import { type Command, InvalidArgumentError, Option } from 'commander';
import { TASK_STATUSES } from '../tasks/status.ts';
import { adminListTasks } from '../tasks/store/admin-list.ts';
import type { AdminTask } from '../tasks/store/admin-row.ts';
import { withDb } from './operator-db.ts';
import { print, printJson } from './operator-print.ts';
import { parseDuration, table } from './operator-text.ts';

/** The statuses `list` filters on: the task statuses, and `paused` (a paused `working` task). */
const LISTED_STATUSES: readonly string[] = [...TASK_STATUSES, 'paused'];

/** `--status a,b`: statuses `list` knows (`purge` takes the same list and keeps the finished ones). */
export function parseStatuses(value: string): string[] {
  const statuses = value.split(',').map((s) => s.trim());
  const bad = statuses.find((s) => !LISTED_STATUSES.includes(s));
  if (bad !== undefined) throw new InvalidArgumentError(`one or more of ${LISTED_STATUSES.join(', ')}`);
  return statuses;
}

function parseLimit(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 1000) throw new InvalidArgumentError('1 to 1000');
  return n;
}

function age(from: Date, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - from.getTime()) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86_400)}d`;
}

function listRows(tasks: AdminTask[]): string {
  const now = Date.now();
  return table(
    ['TASK', 'STATUS', 'TOOL', 'PRINCIPAL', 'AGE', 'UPDATED', 'ATTEMPT', 'MESSAGE'],
    tasks.map((t) => [
      t.taskId,
      t.pausedAt === null ? t.status : 'paused',
      t.toolName,
      t.principal,
      age(t.createdAt, now),
      age(t.lastUpdatedAt, now),
      String(t.attempt),
      (t.statusMessage ?? '').slice(0, 60),
    ]),
  );
}

interface ListOptions {
  status?: string[];
  tool?: string;
  principal?: string;
  olderThan?: number;
  newerThan?: number;
  limit: number;
  json?: boolean;
}

export function addListCommand(tasks: Command): void {
  tasks
    .command('list')
    .description('tasks, newest first')
    .addOption(new Option('--status <list>', 'comma-separated statuses').argParser(parseStatuses))
    .addOption(new Option('--tool <name>', 'only this tool'))
    .addOption(new Option('--principal <name>', 'only this principal'))
    .addOption(
      new Option('--older-than <duration>', 'created at least this long ago (90s, 15m, 2h, 7d)').argParser(
        parseDuration,
      ),
    )
    .addOption(
      new Option('--newer-than <duration>', 'created at most this long ago').argParser(parseDuration),
    )
    .addOption(new Option('--limit <n>', 'at most this many (1-1000)').default(50).argParser(parseLimit))
    .option('--json', 'print JSON')
    .action(async (opts: ListOptions) => {
      const list = await withDb((db) =>
        adminListTasks(db, {
          status: opts.status,
          tool: opts.tool,
          principal: opts.principal,
          olderThanMs: opts.olderThan,
          newerThanMs: opts.newerThan,
          limit: opts.limit,
        }),
      );
      if (opts.json === true) printJson(list);
      else print(list.length === 0 ? 'no tasks\n' : listRows(list));
    });
}
