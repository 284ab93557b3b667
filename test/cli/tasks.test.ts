// `durable-mcp-tasks tasks list|show|cancel|purge`: the operator CLI as a child process against the
// Postgres a real server and its workers use.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { ARTIFACT_CHUNK_BYTES } from '../../src/core/artifacts.ts';
import { runCli, type Run } from '../helpers/cli.ts';
import { useTestServer } from '../helpers/server-process.ts';

/** Runs `tasks …` with DATABASE_URL set to `databaseUrl`. */
function cli(args: string[], databaseUrl: string): Promise<Run> {
  return runCli(['tasks', ...args], { env: { DATABASE_URL: databaseUrl } });
}

describe('the operator CLI', () => {
  const server = useTestServer();

  // A dozen CLI processes, each a cold Node start with tsx: not quick on two cores.
  it('lists, filters, shows, cancels and purges tasks of every principal', { timeout: 120_000 }, async () => {
    const { mcp, tdb } = server;
    const url = tdb.url;
    const done = await mcp.callTool('analyze_numbers', { count: 1000 });
    const asking = await mcp.callTool('confirm_action', { action: 'operate' });
    const slow = await mcp.callTool('analyze_numbers', { count: 1_000_000, delayMsPerChunk: 10_000 });
    await mcp.waitForTask(done.taskId as string);
    await mcp.waitForTask(asking.taskId as string, (t) => t.status === 'input_required');

    // list: a table for people, JSON for scripts, filters.
    const table = await cli(['list'], url);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(
      /^TASK\s+STATUS\s+TOOL\s+PRINCIPAL\s+AGE\s+UPDATED\s+ATTEMPT\s+MESSAGE$/,
    );
    for (const t of [done, asking, slow]) expect(table.stdout).toContain(t.taskId as string);
    const waiting = JSON.parse((await cli(['list', '--status', 'input_required', '--json'], url)).stdout) as {
      taskId: string;
      toolName: string;
      principal: string;
    }[];
    expect(waiting.map((t) => t.taskId)).toEqual([asking.taskId]);
    expect(waiting[0]).toMatchObject({ toolName: 'confirm_action', principal: 'local' });
    const byTool = JSON.parse(
      (await cli(['list', '--tool', 'analyze_numbers', '--json'], url)).stdout,
    ) as unknown[];
    expect(byTool).toHaveLength(2);
    const old = JSON.parse((await cli(['list', '--older-than', '1h', '--json'], url)).stdout) as unknown[];
    expect(old).toHaveLength(0);

    // show: the history, without the answers' content.
    const shown = await cli(['show', asking.taskId as string], url);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/status:\s+input_required/);
    expect(shown.stdout).toMatch(
      /input requests \(1\)\nASKED\s+KEY\s+METHOD\s+ANSWERED\s+QUESTION\n\S+\s+confirm\s+elicitation\/create\s+no\s+Do you confirm this action: operate\?\n/,
    );
    const doneRun = await cli(['show', done.taskId as string, '--json'], url);
    expect(doneRun.code, doneRun.stderr).toBe(0);
    const doneShown = JSON.parse(doneRun.stdout) as {
      task: { status: string; attempt: number };
      steps: unknown[];
    };
    expect(doneShown.task).toMatchObject({ status: 'completed', attempt: 1 });
    expect(doneShown.steps.length).toBeGreaterThan(0);

    // cancel: the running one through the handler's signal, the waiting one at once.
    const cancelRunning = await cli(['cancel', slow.taskId as string], url);
    expect(cancelRunning.stdout).toMatch(/cancel requested|cancelled/);
    expect((await mcp.waitForTask(slow.taskId as string)).status).toBe('cancelled');
    expect((await cli(['cancel', asking.taskId as string], url)).stdout).toBe(
      `${asking.taskId as string}: cancelled\n`,
    );
    expect((await cli(['cancel', done.taskId as string], url)).stdout).toBe(
      `${done.taskId as string}: already completed\n`,
    );

    // purge: only finished tasks, only old enough ones.
    expect(JSON.parse((await cli(['purge', '--older-than', '1h', '--json'], url)).stdout)).toEqual({
      deleted: 0,
    });
    await sql`update tasks set last_updated_at = now() - interval '2 hours' where task_id = ${done.taskId as string}`.execute(
      tdb.db,
    );
    const dry = await cli(['purge', '--older-than', '1h', '--dry-run'], url);
    expect(dry.stdout).toBe('would delete 1 tasks\n');
    expect((await cli(['purge', '--older-than', '1h'], url)).stdout).toBe('deleted 1 tasks\n');
    expect((await mcp.error('tasks/get', { taskId: done.taskId })).code).toBeDefined();
    const left = JSON.parse((await cli(['list', '--json'], url)).stdout) as { taskId: string }[];
    expect(left.map((t) => t.taskId).sort()).toEqual([asking.taskId, slow.taskId].sort());
  });

  it(
    "shows a task's artifacts: name, type, size, digest, in the table and in --json",
    { timeout: 60_000 },
    async () => {
      const { mcp, tdb } = server;
      const created = await mcp.callTool('export_csv', { megabytes: 2 });
      const task = await mcp.waitForTask(created.taskId as string);
      expect(task.status).toBe('completed');
      const { bytes, sha256 } = task.result.structuredContent as { bytes: number; sha256: string };
      expect(bytes).toBeGreaterThanOrEqual(2 * 1_048_576); // (at least 2 MiB, whole rows)

      const shown = await cli(['show', task.taskId as string], tdb.url);
      expect(shown.code, shown.stderr).toBe(0);
      const section = shown.stdout.slice(shown.stdout.indexOf('\nartifacts ('));
      expect(section).toMatch(
        new RegExp(
          String.raw`^\nartifacts \(1\)\nNAME\s+TYPE\s+SIZE\s+BYTES\s+SHA256\s+COMPLETED\n` +
            String.raw`export\.csv\s+text/csv; charset=utf-8\s+2\.0 MiB\s+${bytes}\s+${sha256.slice(0, 12)}\s+` +
            String.raw`\d{4}-\d\d-\d\dT\S+Z\n\nactions \(0\)\n$`,
        ),
      );

      const json = await cli(['show', task.taskId as string, '--json'], tdb.url);
      expect(json.code, json.stderr).toBe(0);
      expect((JSON.parse(json.stdout) as { artifacts: unknown }).artifacts).toEqual([
        {
          name: 'export.csv',
          mimeType: 'text/csv; charset=utf-8',
          size: bytes,
          sha256,
          chunks: Math.ceil(bytes / ARTIFACT_CHUNK_BYTES),
          completedAt: expect.stringMatching(/Z$/) as unknown,
        },
      ]);

      // A task without artifacts says so in one line.
      const plain = await mcp.callTool('analyze_numbers', { count: 10 });
      await mcp.waitForTask(plain.taskId as string);
      const none = await cli(['show', plain.taskId as string], tdb.url);
      expect(none.stdout.endsWith('\nartifacts (0)\n\nactions (0)\n')).toBe(true);
    },
  );

  it(
    'prints client-controlled text with its control characters escaped (an OSC 52 clipboard write stays text)',
    { timeout: 60_000 },
    async () => {
      const { mcp, tdb } = server;
      const task = await mcp.callTool('analyze_numbers', { count: 10 });
      await mcp.waitForTask(task.taskId as string);
      const hostile = 'done\u001b]52;c;ZWNobyBwd25lZA==\u0007 \u009b31m red \u202e';
      await sql`update tasks set status_message = ${hostile} where task_id = ${task.taskId}`.execute(tdb.db);
      for (const args of [['list'], ['show', task.taskId as string]]) {
        const run = await cli(args, tdb.url);
        expect(run.code, run.stderr).toBe(0);
        expect(run.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/);
        expect(run.stdout).toContain('\\u{1b}]52;c;');
      }
      // --json keeps the text exact (JSON escapes it).
      const listed = JSON.parse((await cli(['list', '--json'], tdb.url)).stdout) as {
        statusMessage: string;
      }[];
      expect(listed.map((t) => t.statusMessage)).toContain(hostile);
    },
  );

  it('explains what is missing or wrong', { timeout: 60_000 }, async () => {
    // No DATABASE_URL and no embedded Postgres in this folder (npm-start.test.ts reads one that is there).
    const empty = mkdtempSync(path.join(tmpdir(), 'no-embedded-'));
    const noDb = await runCli(['tasks', 'list'], { env: { DATABASE_URL: '', EMBEDDED_PG_DIR: empty } });
    expect(noDb.code).toBe(1);
    expect(noDb.stderr).toBe(
      `durable-mcp-tasks: DATABASE_URL is unset and there is no embedded Postgres in ${empty}: ` +
        'run `durable-mcp-tasks start` in this folder first, set EMBEDDED_PG_DIR, or set DATABASE_URL\n',
    );
    const unknown = await cli(['show', 'no-such-task'], server.tdb.url);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no task no-such-task');
    expect((await cli(['cancel', 'no-such-task'], server.tdb.url)).stderr).toContain('no task no-such-task');
    // An id that looks like an option is passed after --.
    const dashed = await cli(['show', '--', '-hUVw_MdiTWLsI9rZESpemKp'], server.tdb.url);
    expect(dashed.code).toBe(1);
    expect(dashed.stderr).toContain('no task -hUVw_MdiTWLsI9rZESpemKp');
    const badStatus = await cli(['list', '--status', 'running'], server.tdb.url);
    expect(badStatus.code).toBe(2);
    expect(badStatus.stderr).toContain('working, input_required, completed, failed, cancelled');
    const noCutoff = await cli(['purge'], server.tdb.url);
    expect(noCutoff.code).toBe(2);
    expect(noCutoff.stderr).toContain('--older-than');
  });
});
