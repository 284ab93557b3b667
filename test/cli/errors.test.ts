// A user's mistake gets one clear line from the CLI, never a stack: a port already taken, a reader that
// goes away (`| head`), a DATABASE_URL that is no URL.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, run } from '../helpers/cli.ts';
import { useTestServer } from '../helpers/server-process.ts';

const CLI_LINE = CLI.map((part) => JSON.stringify(part)).join(' ');

/** Runs a shell command line from the repository root (bash, with pipefail). */
const sh = (line: string, env: Record<string, string> = {}) =>
  run('bash', ['-o', 'pipefail', '-c', line], { env: { LOG_LEVEL: 'error', ...env } });

const lines = (text: string) =>
  text
    .trim()
    .split('\n')
    .filter((l) => l !== '');

describe('the CLI, given a mistake', () => {
  const server = useTestServer();

  it('a port already in use: one line naming it and the setting', { timeout: 60_000 }, async () => {
    const port = new URL(server.rt.url).port;
    const run = await sh(`${CLI_LINE} server --port ${port}`, { DATABASE_URL: server.tdb.url });
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toEqual([
      `durable-mcp-tasks: 127.0.0.1:${port} is already in use: choose another with PORT (or --port)`,
    ]);
  });

  it(
    'output piped into a reader that stops early (| head): no EPIPE stack, exit 0',
    { timeout: 60_000 },
    async () => {
      // A status message of 300 kB: more than a pipe holds, so the writer meets the closed pipe.
      const task = await server.mcp.callTool('confirm_action', { action: 'pipe' });
      await server.tdb.db
        .updateTable('tasks')
        .set({ status_message: 'm'.repeat(300_000) })
        .where('task_id', '=', task.taskId as string)
        .execute();
      const run = await sh(`${CLI_LINE} tasks show --json ${task.taskId as string} | head -c 100`, {
        DATABASE_URL: server.tdb.url,
      });
      expect(run.stdout).toHaveLength(100);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
    },
  );

  it(
    'a tools module that throws as it loads: one line with its file and line',
    { timeout: 60_000 },
    async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'tools-'));
      try {
        writeFileSync(
          path.join(dir, 'bad.ts'),
          "export const tools = [];\n\nthrow new Error('boom at import');\n",
        );
        const run = await sh(`${CLI_LINE} start --tools ${path.join(dir, 'bad.ts')}`, {
          DATABASE_URL: server.tdb.url,
        });
        expect(run.code).toBe(1);
        expect(lines(run.stderr)).toEqual([
          `durable-mcp-tasks: --tools ${path.join(dir, 'bad.ts')} failed to load: boom at import (${path.join(dir, 'bad.ts')}:3)`,
        ]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it('a DATABASE_URL that is no Postgres URL: one line', { timeout: 60_000 }, async () => {
    const run = await sh(`${CLI_LINE} tasks list`, { DATABASE_URL: 'not-a-url' });
    expect(run.code).not.toBe(0);
    expect(lines(run.stderr)).toHaveLength(1);
    expect(run.stderr).toContain('DATABASE_URL: not a Postgres URL');
  });
});
