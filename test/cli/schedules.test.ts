// `durable-mcp-tasks schedules list|add|pause|resume|remove|run-now`: the CLI as a child process against
// the Postgres a real server fires schedules from.
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
});
