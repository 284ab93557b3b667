// `durable-mcp-tasks tasks list|show|cancel|purge`: the operator's view of every principal's tasks, straight
// from Postgres (DATABASE_URL, or this folder's embedded one). Tables for people, --json for scripts.
import { Command, InvalidArgumentError, Option } from 'commander';
import { formatBytes } from '../core/bytes.ts';
import { TaskNotFoundError } from '../tasks/errors.ts';
import { TASK_STATUSES } from '../tasks/status.ts';
import { addTaskActionCommands } from './task-actions.ts';
import { cliActor, withDb } from './operator-db.ts';
import { parseDuration, printable, table } from './operator-text.ts';
import {
  adminCancelTask,
  adminGetTask,
  adminListTasks,
  adminPurgeTasks,
  type AdminTask,
  type TaskHistory,
} from '../tasks/store/admin.ts';

/** The statuses `list` filters on: the task statuses, and `paused` (a paused `working` task). */
const LISTED_STATUSES: readonly string[] = [...TASK_STATUSES, 'paused'];

function parseStatuses(value: string): string[] {
  const statuses = value.split(',').map((s) => s.trim());
  const bad = statuses.find((s) => !LISTED_STATUSES.includes(s));
  if (bad !== undefined) throw new InvalidArgumentError(`one or more of ${LISTED_STATUSES.join(', ')}`);
  return statuses;
}

function age(from: Date, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - from.getTime()) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86_400)}d`;
}

/** Hex digits of an artifact's SHA-256 a table shows (`--json` has all 64). */
const SHORT_SHA256 = 12;

const print = (text: string): void => void process.stdout.write(text);
const json = (value: unknown): void => print(`${JSON.stringify(value, null, 2)}\n`);

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

/** Each attempt: its worker, start, how it ended, and a crash's message with the stack's first frame. */
function attemptsSection(attempts: TaskHistory['attempts']): string {
  if (attempts.length === 0) return '\nattempts (0)\n';
  return (
    `\nattempts (${attempts.length})\n` +
    table(
      ['ATTEMPT', 'WORKER', 'CLAIMED', 'ENDED', 'OUTCOME', 'ERROR'],
      attempts.map((a) => [
        String(a.attempt),
        a.workerId,
        a.claimedAt.toISOString(),
        a.endedAt?.toISOString() ?? '',
        a.outcome ?? (a.endedAt === null ? 'running or lost' : ''),
        a.errorMessage === null
          ? ''
          : `${a.errorMessage.slice(0, 200)}${a.errorStack === null ? '' : ` ${a.errorStack.split('\n')[0]!.trim()}`}`,
      ]),
    )
  );
}

/** The audit trail: who did what, when. */
function actionsSection(actions: TaskHistory['actions']): string {
  if (actions.length === 0) return '\nactions (0)\n';
  return (
    `\nactions (${actions.length})\n` +
    table(
      ['AT', 'ACTOR', 'ACTION', 'DETAIL'],
      actions.map((a) => [
        a.at.toISOString(),
        a.actor,
        a.action,
        Object.keys(a.detail).length === 0 ? '' : JSON.stringify(a.detail),
      ]),
    )
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

export function addTasksCommand(program: Command): void {
  const tasks = new Command('tasks')
    .description("operate on every principal's tasks in Postgres (DATABASE_URL): list, show, cancel, purge")
    .addHelpText(
      'after',
      '\nReads DATABASE_URL. Exit status: 0 done, 1 no such task or a database error, 2 usage.\n' +
        "An id that starts with '-' (earlier versions made some) goes after --: tasks show -- -AbC…\n",
    );

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
    .addOption(
      new Option('--limit <n>', 'at most this many (1-1000)').default(50).argParser((v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1 || n > 1000) throw new InvalidArgumentError('1 to 1000');
        return n;
      }),
    )
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
      if (opts.json === true) json(list);
      else print(list.length === 0 ? 'no tasks\n' : listRows(list));
    });

  tasks
    .command('show <taskId>')
    .description(
      'one task: status, owner, attempts, lease, durable steps, input requests (not their answers), artifacts',
    )
    .option('--json', 'print JSON')
    .action(async (taskId: string, opts: { json?: boolean }) => {
      const history = await withDb((db) => adminGetTask(db, taskId));
      if (history === undefined) throw new Error(`no task ${taskId}`);
      if (opts.json === true) return json(history);
      const t = history.task;
      const rows: [string, string][] = [
        ['task', t.taskId],
        ['status', t.pausedAt === null ? t.status : `${t.status} (paused at ${t.pausedAt.toISOString()})`],
        ['message', t.statusMessage ?? ''],
        ['tool', t.toolName],
        ['principal', t.principal],
        ['created', t.createdAt.toISOString()],
        ['updated', t.lastUpdatedAt.toISOString()],
        ['expires', t.expiresAt?.toISOString() ?? 'never'],
        ['attempt', `${t.attempt} (${t.failures} crashed)`],
        [
          'lease',
          t.leasedBy === null ? 'none' : `${t.leasedBy} until ${t.leaseExpiresAt?.toISOString() ?? '?'}`,
        ],
        ['cancel requested', t.cancelRequestedAt?.toISOString() ?? 'no'],
      ];
      rows.push(['arguments', JSON.stringify(history.arguments).slice(0, 500)]);
      if (t.error !== null) rows.push(['error', JSON.stringify(t.error)]);
      if (t.result !== null) rows.push(['result', JSON.stringify(t.result).slice(0, 500)]);
      print(rows.map(([k, v]) => `${`${k}:`.padEnd(18)}${printable(v)}\n`).join(''));
      print(attemptsSection(history.attempts));
      print(
        `\nsteps (${history.steps.length})\n` +
          (history.steps.length === 0
            ? ''
            : table(
                ['AT', 'ATTEMPT', 'STEP'],
                history.steps.map((s) => [s.at.toISOString(), String(s.attempt), s.name]),
              )),
      );
      if (history.stepFailures.length > 0) {
        print(
          `\nstep failures (${history.stepFailures.length})\n` +
            table(
              ['LAST FAILED', 'STEP', 'FAILURES', 'LAST ERROR'],
              history.stepFailures.map((f) => [f.at.toISOString(), f.name, String(f.failures), f.lastError]),
            ),
        );
      }
      print(
        `\ninput requests (${history.inputRequests.length})\n` +
          (history.inputRequests.length === 0
            ? ''
            : table(
                ['ASKED', 'KEY', 'METHOD', 'ANSWERED', 'QUESTION'],
                history.inputRequests.map((i) => [
                  i.askedAt.toISOString(),
                  i.key,
                  i.method,
                  i.answeredAt?.toISOString() ?? 'no',
                  (i.question ?? '').slice(0, 200),
                ]),
              )),
      );
      print(
        `\nartifacts (${history.artifacts.length})\n` +
          (history.artifacts.length === 0
            ? ''
            : table(
                ['NAME', 'TYPE', 'SIZE', 'BYTES', 'SHA256', 'COMPLETED'],
                history.artifacts.map((a) => [
                  a.name,
                  a.mimeType,
                  formatBytes(a.size),
                  String(a.size),
                  a.sha256.slice(0, SHORT_SHA256),
                  a.completedAt.toISOString(),
                ]),
              )),
      );
      print(actionsSection(history.actions));
    });

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
      if (opts.json === true) return json({ taskId, ...outcome });
      print(
        outcome.cancelledNow
          ? `${taskId}: cancelled\n`
          : outcome.status === 'working'
            ? `${taskId}: cancel requested; the worker running it stops at its next check\n`
            : `${taskId}: already ${outcome.status}\n`,
      );
    });

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
    .action(async (opts: { olderThan: number; status?: string[]; dryRun?: boolean; json?: boolean }) => {
      const n = await withDb((db) =>
        adminPurgeTasks(db, {
          olderThanMs: opts.olderThan,
          ...(opts.status === undefined ? {} : { status: opts.status }),
          dryRun: opts.dryRun === true,
        }),
      );
      if (opts.json === true) return json({ [opts.dryRun === true ? 'wouldDelete' : 'deleted']: n });
      print(opts.dryRun === true ? `would delete ${n} tasks\n` : `deleted ${n} tasks\n`);
    });

  addTaskActionCommands(tasks);

  // Usage errors exit 2, like `call`.
  for (const cmd of [tasks, ...tasks.commands]) {
    cmd.exitOverride((err) => {
      process.exit(err.code === 'commander.helpDisplayed' || err.code === 'commander.help' ? 0 : 2);
    });
  }
  program.addCommand(tasks);
}
