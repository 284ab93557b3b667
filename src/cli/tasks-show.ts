// `tasks show <taskId>`: one task and its history, as a column of fields and a table per section.
import type { Command } from 'commander';
import { formatBytes } from '../core/bytes.ts';
import { adminGetTask, type TaskHistory } from '../tasks/store/admin-task.ts';
import { withDb } from './operator-db.ts';
import { print, printJson } from './operator-print.ts';
import { printable, table } from './operator-text.ts';

/** Hex digits of an artifact's SHA-256 a table shows (`--json` has all 64). */
const SHORT_SHA256 = 12;

/** The task's own fields, one `name: value` line each. */
function fieldsSection({ task: t, arguments: args }: TaskHistory): string {
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
    ['lease', t.leasedBy === null ? 'none' : `${t.leasedBy} until ${t.leaseExpiresAt?.toISOString() ?? '?'}`],
    ['cancel requested', t.cancelRequestedAt?.toISOString() ?? 'no'],
  ];
  rows.push(['arguments', JSON.stringify(args).slice(0, 500)]);
  if (t.error !== null) rows.push(['error', JSON.stringify(t.error)]);
  if (t.result !== null) rows.push(['result', JSON.stringify(t.result).slice(0, 500)]);
  return rows.map(([k, v]) => `${`${k}:`.padEnd(18)}${printable(v)}\n`).join('');
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

function stepsSection(steps: TaskHistory['steps']): string {
  return (
    `\nsteps (${steps.length})\n` +
    (steps.length === 0
      ? ''
      : table(
          ['AT', 'ATTEMPT', 'STEP'],
          steps.map((s) => [s.at.toISOString(), String(s.attempt), s.name]),
        ))
  );
}

/** Shown only when a step failed. */
function stepFailuresSection(failures: TaskHistory['stepFailures']): string {
  if (failures.length === 0) return '';
  return (
    `\nstep failures (${failures.length})\n` +
    table(
      ['LAST FAILED', 'STEP', 'FAILURES', 'LAST ERROR'],
      failures.map((f) => [f.at.toISOString(), f.name, String(f.failures), f.lastError]),
    )
  );
}

function inputRequestsSection(inputs: TaskHistory['inputRequests']): string {
  return (
    `\ninput requests (${inputs.length})\n` +
    (inputs.length === 0
      ? ''
      : table(
          ['ASKED', 'KEY', 'METHOD', 'ANSWERED', 'QUESTION'],
          inputs.map((i) => [
            i.askedAt.toISOString(),
            i.key,
            i.method,
            i.answeredAt?.toISOString() ?? 'no',
            (i.question ?? '').slice(0, 200),
          ]),
        ))
  );
}

function artifactsSection(artifacts: TaskHistory['artifacts']): string {
  return (
    `\nartifacts (${artifacts.length})\n` +
    (artifacts.length === 0
      ? ''
      : table(
          ['NAME', 'TYPE', 'SIZE', 'BYTES', 'SHA256', 'COMPLETED'],
          artifacts.map((a) => [
            a.name,
            a.mimeType,
            formatBytes(a.size),
            String(a.size),
            a.sha256.slice(0, SHORT_SHA256),
            a.completedAt.toISOString(),
          ]),
        ))
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

/** The task that started this one, and the child tasks it started (shown only when there are any). */
function familySection({ parent, children }: TaskHistory): string {
  const detached = (d: boolean) => (d ? ' (detached)' : '');
  const started =
    parent === null ? '' : `\nstarted by ${parent.taskId} as ${parent.name}${detached(parent.detached)}\n`;
  if (children.length === 0) return started;
  return (
    started +
    `\nchildren (${children.length})\n` +
    table(
      ['TASK', 'NAME', 'TOOL', 'STATUS'],
      children.map((c) => [c.taskId, `${c.name}${detached(c.detached)}`, c.toolName, c.status]),
    )
  );
}

function showText(history: TaskHistory): string {
  return (
    fieldsSection(history) +
    familySection(history) +
    attemptsSection(history.attempts) +
    stepsSection(history.steps) +
    stepFailuresSection(history.stepFailures) +
    inputRequestsSection(history.inputRequests) +
    artifactsSection(history.artifacts) +
    actionsSection(history.actions)
  );
}

export function addShowCommand(tasks: Command): void {
  tasks
    .command('show <taskId>')
    .description(
      'one task: status, owner, attempts, lease, durable steps, input requests (not their answers), artifacts',
    )
    .option('--json', 'print JSON')
    .action(async (taskId: string, opts: { json?: boolean }) => {
      const history = await withDb((db) => adminGetTask(db, taskId));
      if (history === undefined) throw new Error(`no task ${taskId}`);
      if (opts.json === true) return printJson(history);
      print(showText(history));
    });
}
