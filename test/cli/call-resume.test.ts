// `durable-mcp-tasks call` never loses a task: every task is recorded in the state folder before its id
// is printed, so a CLI killed mid-task (SIGKILL under tmux, as a closed terminal or a crash) is followed
// again with `--resume`, input included, and `--list` shows the client's tasks with their status now.
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, runCli } from '../helpers/cli.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { useTerminals } from '../helpers/terminal.ts';
import { waitFor } from '../helpers/wait.ts';

describe('call, killed and resumed', () => {
  const server = useTestServer();
  const terminals = useTerminals();
  const stateDir = mkdtempSync(path.join(tmpdir(), 'cli-resume-state-'));
  const options = () => ['--url', server.rt.url, '--state-dir', stateDir];
  const inTerminal = (name: string, args: string[]) =>
    terminals.open(name, [...CLI, 'call', ...args, ...options()]);
  const call = (args: string[], input?: string) =>
    runCli(['call', ...args, ...options()], {
      env: { MCP_TOKEN: '' },
      ...(input === undefined ? {} : { input }),
    });

  /** The task id the CLI printed as soon as the task existed. */
  const printedId = (screen: () => string) =>
    waitFor(() => /task (\S+) \(if this stops/.exec(screen())?.[1], {
      timeoutMs: 20_000,
      what: 'the task id',
    });

  async function statusOf(taskId: string): Promise<string> {
    const row = await server.tdb.db
      .selectFrom('tasks')
      .select('status')
      .where('task_id', '=', taskId)
      .executeTakeFirstOrThrow();
    return row.status;
  }

  it('SIGKILLed mid-task: the task runs on, and --resume shows its progress and its result', async () => {
    const first = inTerminal('killed', [
      'analyze_numbers',
      '--arg',
      'count=1000000',
      '--arg',
      // 15 s: the task must still be running when the second CLI (a cold tsx start) attaches, on a busy machine too.
      'delayMsPerChunk=1500',
    ]);
    const taskId = await printedId(first.screen);
    // The record is on disk before the id is on screen.
    expect(readdirSync(path.join(stateDir, 'tasks')).length).toBeGreaterThan(0);
    await waitFor(() => /chunk \d+\/10/.test(first.screen()), { timeoutMs: 20_000, what: 'progress' });
    first.kill();
    expect(await waitFor(first.exitCode, { what: 'the killed CLI to end' })).toBe('137');
    expect(await statusOf(taskId)).toBe('working');

    const again = inTerminal('resumed', ['--resume']);
    expect(await printedId(again.screen)).toBe(taskId);
    await waitFor(() => /analyze_numbers {2}\[#+-+\] \d+%/.test(again.screen()), {
      timeoutMs: 20_000,
      what: 'the progress bar of the resumed task',
    });
    expect(await waitFor(again.exitCode, { timeoutMs: 60_000, what: 'the resumed CLI to end' })).toBe('0');
    expect(again.screen()).toMatch(/Analyzed 1000000 values in 10 chunks: sum=\d+/);
  }, 90_000);

  it('a task waiting for input when the client died is answered after --resume ID', async () => {
    const first = inTerminal('asking', ['confirm_action', '--arg', 'action=resume me']);
    const taskId = await printedId(first.screen);
    await waitFor(() => first.screen().includes('Confirm (y/n):'), { timeoutMs: 20_000, what: 'the prompt' });
    first.kill();
    await waitFor(first.exitCode, { what: 'the killed CLI to end' });
    expect(await statusOf(taskId)).toBe('input_required');

    const resumed = await call(['--resume', taskId], 'y\n');
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toContain('? Do you confirm this action: resume me?');
    expect(resumed.stdout).toBe('confirmed: resume me\n');
  });

  it('--list shows the recorded tasks with their status now; --resume without an unfinished one says so', async () => {
    const started = await call(['echo', '--arg', 'text=not a task']);
    expect(started.code).toBe(0);
    const listed = await call(['--list']);
    expect(listed.code, listed.stderr).toBe(0);
    const [header, ...rows] = listed.stdout.trim().split('\n');
    expect(header).toMatch(/^TASK +TOOL +STATUS +CREATED +MESSAGE$/);
    expect(rows.some((r) => /analyze_numbers +completed/.test(r))).toBe(true);
    expect(rows.some((r) => /confirm_action +completed/.test(r))).toBe(true);
    const json = await call(['--list', '--json']);
    const records = JSON.parse(json.stdout) as Array<{ tool: string; status: string; shownAt?: string }>;
    expect(records.map((r) => r.status)).toEqual(['completed', 'completed']);
    expect(records.every((r) => r.shownAt !== undefined)).toBe(true);

    const nothing = await call(['--resume']);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr.trim()).toBe(
      `durable-mcp-tasks call: no unfinished task of ${server.rt.url} in ${stateDir}; see call --list`,
    );
  });
});
