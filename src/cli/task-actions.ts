// `durable-mcp-tasks tasks resume|fork`: the operator's actions on tasks that stopped, each recorded on
// the task (who, when, what). Resume runs a paused task again from its last completed step; fork starts
// a finished one again under a new id, from the start or from a step.
import { type Command, Option } from 'commander';
import { sql, type Kysely } from 'kysely';
import { loadConfig, publicOrigin } from '../config.ts';
import { signalPath } from '../core/signal-delivery.ts';
import type { Database } from '../db/database.ts';
import { TaskNotFoundError } from '../tasks/errors.ts';
import {
  countPausedTasks,
  findPausedTasks,
  MAX_RESUME_BATCH,
  resumeTasks,
  type PausedSelection,
} from '../tasks/store/pause.ts';
import { forkTask, ForkRefusedError, type ForkedSignal } from '../tasks/store/fork.ts';
import { cliActor, withDb } from './operator-db.ts';
import { print, printJson } from './operator-print.ts';
import { parseDuration, table } from './operator-text.ts';

interface ResumeOptions {
  tool?: string;
  principal?: string;
  since?: number;
  yes?: boolean;
  json?: boolean;
}

export function addTaskActionCommands(tasks: Command): void {
  tasks
    .command('resume [taskIds...]')
    .description(
      'run paused tasks again from their last completed step: by id, or in bulk by --tool/--principal/--since ' +
        '(a bulk resume prints what it would resume; add --yes to resume them)',
    )
    .addOption(new Option('--tool <name>', 'paused tasks of this tool'))
    .addOption(new Option('--principal <name>', 'paused tasks of this principal'))
    .addOption(
      new Option('--since <duration>', 'paused at most this long ago (90s, 15m, 2h, 7d)').argParser(
        parseDuration,
      ),
    )
    .option('--yes', 'resume every task the filter selects (without it, a bulk resume only counts them)')
    .option('--json', 'print JSON')
    .action(async (taskIds: string[], opts: ResumeOptions) => {
      const bulk = taskIds.length === 0;
      if (bulk && opts.tool === undefined && opts.principal === undefined && opts.since === undefined) {
        throw new Error('name task ids, or select them with --tool, --principal or --since');
      }
      const selection: PausedSelection = bulk
        ? { tool: opts.tool, principal: opts.principal, pausedWithinMs: opts.since }
        : { taskIds };
      if (bulk && opts.yes !== true) {
        const [found, total] = await withDb((db) =>
          Promise.all([findPausedTasks(db, selection), countPausedTasks(db, selection)]),
        );
        return printDryRun(found, total, opts);
      }
      const resumed = await withDb(
        (db, queue) => resumeAll(db, selection, (s) => resumeTasks(db, queue, s, cliActor())),
        {
          queue: true,
        },
      );
      if (opts.json === true) return printJson({ resumed });
      for (const id of resumed) print(`${id}: resumed\n`);
      for (const id of bulk ? [] : taskIds.filter((t) => !resumed.includes(t))) {
        print(`${id}: not paused (no such task, or not paused now)\n`);
      }
      if (bulk) print(`resumed ${resumed.length} tasks\n`);
      if (!bulk && resumed.length < taskIds.length) process.exitCode = 1;
    });

  tasks
    .command('fork <taskId>')
    .description(
      'start a finished task again under a new id (same principal, tool, arguments): from the start, or ' +
        'with --from-step, with the steps before that one copied (a signal they created that was still ' +
        'pending gets a new URL, printed here: PUBLIC_URL, or http://HOST:PORT, + /signals/{token})',
    )
    .addOption(new Option('--from-step <name>', 'the first step that runs again'))
    .option('--json', 'print JSON')
    .action(async (taskId: string, opts: { fromStep?: string; json?: boolean }) => {
      const forked = await withDb(
        (db, queue) => forkTask(db, queue, taskId, { fromStep: opts.fromStep }, cliActor()),
        {
          queue: true,
        },
      ).catch((err: unknown) => {
        if (err instanceof TaskNotFoundError) throw new Error(`no task ${taskId}`);
        if (err instanceof ForkRefusedError) throw new Error(err.message);
        throw err;
      });
      const signals = signalLinks(forked.signals);
      if (opts.json === true) return printJson({ taskId: forked.taskId, forkedFrom: taskId, signals });
      print(
        `${forked.taskId}: forked from ${taskId}${opts.fromStep === undefined ? '' : ` at step ${opts.fromStep}`}\n`,
      );
      for (const s of signals) {
        const until = s.timeoutAt === null ? '' : ` (until ${s.timeoutAt})`;
        print(`  signal ${s.name} waits for a delivery to ${s.url}${until}\n`);
      }
    });
}

/**
 * A fork's pending signals as their deliverer needs them: the URL the server would hand out for each
 * token (as the worker builds it: PUBLIC_URL, or http://HOST:PORT, + /signals/{token}).
 */
function signalLinks(signals: readonly ForkedSignal[]) {
  if (signals.length === 0) return [];
  const origin = publicOrigin(
    loadConfig({ PUBLIC_URL: process.env.PUBLIC_URL, HOST: process.env.HOST, PORT: process.env.PORT }),
  );
  return signals.map(({ name, token, timeoutAt }) => ({
    name,
    url: `${origin}${signalPath(token)}`,
    timeoutAt: timeoutAt?.toISOString() ?? null,
  }));
}

/**
 * Every selected task, a batch (one transaction) at a time; in bulk, only tasks paused before it began
 * (by the database's clock), so that one pausing again meanwhile is not resumed twice.
 */
async function resumeAll(
  db: Kysely<Database>,
  selection: PausedSelection,
  resumeBatch: (selection: PausedSelection) => Promise<string[]>,
): Promise<string[]> {
  if (selection.taskIds !== undefined) return resumeBatch(selection);
  const { rows } = await sql<{ now: Date }>`select now() as now`.execute(db);
  const pinned: PausedSelection = { ...selection, pausedBefore: rows[0]!.now };
  const resumed: string[] = [];
  for (;;) {
    const batch = await resumeBatch(pinned);
    resumed.push(...batch);
    if (batch.length < MAX_RESUME_BATCH) return resumed;
  }
}

function printDryRun(
  found: Awaited<ReturnType<typeof findPausedTasks>>,
  total: number,
  opts: ResumeOptions,
): void {
  if (opts.json === true) {
    printJson({ wouldResume: total, tasks: found });
    return;
  }
  const listed = found.length < total ? ` (the first ${found.length} listed)` : '';
  print(`would resume ${total} paused tasks${listed}${found.length === 0 ? '' : ':'}\n`);
  if (found.length > 0) {
    print(
      table(
        ['TASK', 'TOOL', 'PRINCIPAL', 'PAUSED'],
        found.map((t) => [t.taskId, t.toolName, t.principal, t.pausedAt.toISOString()]),
      ),
    );
  }
  print('run it again with --yes to resume them\n');
}
