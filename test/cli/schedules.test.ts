// `durable-mcp-tasks schedules list|add|pause|resume|remove|run-now`: the CLI as a child process against
// the Postgres a real server fires schedules from.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, ROOT, type Run } from '../helpers/cli.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

function cli(args: string[], databaseUrl: string): Promise<Run> {
  return runCli(['schedules', ...args], { env: { DATABASE_URL: databaseUrl } });
}

describe('the schedules CLI', () => {
  const server = useTestServer({ env: { SCHEDULE_POLL_INTERVAL_MS: '100' } });

  /** How many tasks the schedule has made so far. */
  const made = async (name: string) =>
    (
      await server.tdb.db
        .selectFrom('tasks')
        .select('task_id')
        .where('origin', '=', `schedule:${name}`)
        .execute()
    ).length;

  // A handful of CLI processes, each a cold Node start with tsx.
  it(
    'adds a schedule the server fires, lists it, pauses, runs it now, resumes and removes it',
    { timeout: 120_000 },
    async () => {
      const url = server.tdb.url;
      const added = await cli(
        [
          'add',
          'each-second',
          '--cron',
          '* * * * * *',
          '--tool',
          'analyze_numbers',
          '--principal',
          'local',
          '--arguments',
          '{"count":10}',
          '--overlap',
          'allow',
          '--catch-up',
          'none',
        ],
        url,
      );
      expect(added.code, added.stderr).toBe(0);
      expect(added.stdout).toBe('each-second: added\n');
      await waitFor(async () => (await made('each-second')) >= 2, { what: 'two scheduled tasks' });

      const table = await cli(['list'], url);
      expect(table.code, table.stderr).toBe(0);
      expect(table.stdout.split('\n')[0]).toMatch(
        /^NAME\s+STATE\s+CRON\s+ZONE\s+TOOL\s+NEXT\s+LAG\s+LAST TASK\s+LAST STATUS\s+ERROR$/,
      );
      expect(table.stdout).toMatch(
        /each-second\s+active\s+\* \* \* \* \* \*\s+UTC\s+analyze_numbers\s+\d{4}-/,
      );
      const [listed] = JSON.parse((await cli(['list', '--json'], url)).stdout) as {
        name: string;
        lastTaskId: string | null;
        lagSeconds: number;
        nextFireAt: string;
      }[];
      expect(listed?.name).toBe('each-second');
      expect(listed?.lastTaskId).toEqual(expect.any(String));
      expect(typeof listed?.lagSeconds).toBe('number');

      expect((await cli(['pause', 'each-second'], url)).stdout).toBe('each-second: paused\n');
      const paused = JSON.parse((await cli(['list', '--json'], url)).stdout) as { paused: boolean }[];
      expect(paused[0]?.paused).toBe(true);
      const before = await made('each-second');
      const runNow = await cli(['run-now', 'each-second'], url);
      expect(runNow.code, runNow.stderr).toBe(0);
      // A paused schedule still runs what run-now asks for: one more task.
      await waitFor(async () => (await made('each-second')) > before, { what: 'the run-now task' });

      expect((await cli(['resume', 'each-second'], url)).code).toBe(0);
      expect((await cli(['remove', 'each-second'], url)).stdout).toBe('each-second: removed\n');
      const again = await cli(['remove', 'each-second'], url);
      expect(again.code).toBe(1);
      expect(again.stderr).toContain('no schedule each-second');
    },
  );

  it('refuses a bad schedule in one line naming it', { timeout: 60_000 }, async () => {
    const url = server.tdb.url;
    const badCron = await cli(
      ['add', 'bad', '--cron', '61 * * * *', '--tool', 'analyze_numbers', '--principal', 'p'],
      url,
    );
    expect(badCron.code).toBe(1);
    expect(badCron.stderr).toMatch(/schedule bad: cron: cron "61 \* \* \* \*"/);
    const badTool = await cli(
      [
        'add',
        'bad',
        '--cron',
        '0 * * * *',
        '--tool',
        'nope',
        '--principal',
        'p',
        '--tools',
        path.join(ROOT, 'src/tools/shipped/index.ts'),
      ],
      url,
    );
    expect(badTool.code).toBe(1);
    expect(badTool.stderr).toMatch(/schedule bad: unknown tool "nope"/);
    expect(JSON.parse((await cli(['list', '--json'], url)).stdout)).toEqual([]);
  });

  it(
    'refuses at start a tools module whose schedule is bad, in one line naming it',
    { timeout: 90_000 },
    async () => {
      // Inside the repository, so that the module finds zod and the package as a user's would.
      mkdirSync(path.join(ROOT, 'test-output'), { recursive: true });
      const dir = mkdtempSync(path.join(ROOT, 'test-output', 'schedules-'));
      const module = (schedule: string) =>
        `import { z } from 'zod';\nimport { defineSchedule, defineTool } from '${ROOT}/src/index.ts';\n` +
        `const report = defineTool({ name: 'report', description: 'r', inputSchema: z.object({ days: z.number() }),\n` +
        `  handler: () => ({ content: [] }) });\nexport const tools = [report];\n` +
        `export const schedules = [defineSchedule({ name: 'nightly', principal: 'ops', ${schedule} })];\n`;
      const start = (file: string) =>
        runCli(['server', '--port', '0', '--tools', file], {
          env: { DATABASE_URL: server.tdb.url, LOG_LEVEL: 'error' },
        });
      try {
        const cases: [string, string, RegExp][] = [
          [
            'cron.ts',
            "cron: '61 * * * *', tool: report",
            /^durable-mcp-tasks: --tools .*cron\.ts failed to load: schedule nightly: cron: cron "61 \* \* \* \*"/,
          ],
          [
            'zone.ts',
            "cron: '0 3 * * *', timezone: 'Europe/Berln', tool: report",
            /schedule nightly: cron: unknown time zone "Europe\/Berln"/,
          ],
          [
            'tool.ts',
            "cron: '0 3 * * *', tool: 'nope'",
            /^durable-mcp-tasks: schedule nightly: unknown tool "nope"$/,
          ],
          [
            'args.ts',
            "cron: '0 3 * * *', tool: report, arguments: { days: 'one' }",
            /^durable-mcp-tasks: schedule nightly: Invalid arguments for tool report: .*days/,
          ],
        ];
        for (const [name, schedule, message] of cases) {
          writeFileSync(path.join(dir, name), module(schedule));
          const run = await start(path.join(dir, name));
          expect(run.code, name).toBe(1);
          const lines = run.stderr.trim().split('\n');
          expect(lines, run.stderr).toHaveLength(1);
          expect(lines[0]).toMatch(message);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
