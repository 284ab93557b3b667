import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { alive } from '../../src/db/embedded.ts';
import { expectedAnalysis } from '../helpers/analysis.ts';
import { runCli } from '../helpers/cli.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { freePort } from '../helpers/ports.ts';
import { waitFor } from '../helpers/wait.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const dir = mkdtempSync(path.join(tmpdir(), 'mcp-start-'));
chmodSync(dir, 0o755); // as root, Postgres runs as the postgres user, who must reach its data
const dataDir = path.join(dir, 'postgres');
const pgPort = String(await freePort());
const children: ChildProcess[] = [];

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  const pid = postmasterPid();
  if (pid !== undefined && alive(pid)) process.kill(pid, 'SIGINT');
  await sleep(200);
  rmSync(dir, { recursive: true, force: true });
});

/** The node process `npm start` runs (exec'd by the script's shell: a child of npm). */
function serverPid(npmPid: number): number {
  const children = execFileSync('pgrep', ['-P', String(npmPid)], { encoding: 'utf8' })
    .trim()
    .split('\n');
  expect(children).toHaveLength(1);
  return Number(children[0]);
}

function postmasterPid(): number | undefined {
  const file = path.join(dataDir, 'postmaster.pid');
  return existsSync(file) ? Number(readFileSync(file, 'utf8').split('\n')[0]) : undefined;
}

/**
 * `durable-mcp-tasks start` (the bin, run from source), or `npm start` itself: no DATABASE_URL, so the
 * embedded Postgres.
 */
async function start(
  via: 'bin' | 'npm' = 'bin',
  extraEnv: Record<string, string> = {},
): Promise<{
  child: ChildProcess;
  url: string;
  listening: Record<string, unknown>;
  exited: Promise<number | null>;
}> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: '0',
    EMBEDDED_PG_DIR: dataDir,
    EMBEDDED_PG_PORT: pgPort,
    LOG_LEVEL: 'info',
    ...extraEnv,
  };
  delete env.DATABASE_URL;
  const child =
    via === 'npm'
      ? spawn('npm', ['start'], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] })
      : spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'start'], {
          cwd: ROOT,
          env,
          stdio: ['ignore', 'ignore', 'pipe'],
        });
  children.push(child);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let log = '';
  const listening = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no 'listening' line in time:\n${log}`)), 60_000);
    child.stderr.on('data', (chunk: Buffer) => {
      log += chunk.toString();
      // Whole lines only: the last piece may still be arriving.
      const line = log
        .split('\n')
        .slice(0, -1)
        .find((l) => l.includes('"msg":"listening"'));
      if (line !== undefined) {
        clearTimeout(timer);
        resolve(JSON.parse(line) as Record<string, unknown>);
      }
    });
    child.once('exit', (code) => reject(new Error(`exited with ${code}:\n${log}`)));
  });
  return { child, url: String(listening.url), listening, exited };
}

describe('start with no DATABASE_URL', () => {
  it('serves tools on an embedded Postgres, keeps tasks across restarts, and shuts down cleanly', async () => {
    const first = await start();
    const mcp = new RawMcp(first.url);

    // A second project's `start` on the same port must not adopt this one's Postgres: one line, exit 1.
    const other = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'start'], {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: '',
        PORT: '0',
        EMBEDDED_PG_DIR: path.join(dir, 'other-postgres'),
        EMBEDDED_PG_PORT: pgPort,
        LOG_LEVEL: 'error',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(other);
    let otherErr = '';
    other.stderr.on('data', (d: Buffer) => (otherErr += d.toString()));
    const otherCode = await new Promise<number | null>((resolve) => other.once('exit', resolve));
    expect(otherCode).toBe(1);
    expect(otherErr.trim().split('\n')).toEqual([
      `durable-mcp-tasks: 127.0.0.1:${pgPort} is taken by another Postgres (its data is in ${realpathSync(dataDir)}): set EMBEDDED_PG_PORT to a free port`,
    ]);
    const created = await mcp.callTool('analyze_numbers', { count: 20_000, chunkSize: 5000 });
    const done = await mcp.waitForTask(created.taskId);
    expect(done.result.structuredContent).toEqual(expectedAnalysis(20_000, 5000));
    const waiting = await mcp.callTool('confirm_action', { action: 'survive a restart' });
    await mcp.waitForTask(waiting.taskId, (t) => t.status === 'input_required');

    // The operator CLI without DATABASE_URL reads this folder's embedded Postgres, and says so.
    const embeddedEnv = { DATABASE_URL: '', EMBEDDED_PG_DIR: dataDir, EMBEDDED_PG_PORT: pgPort };
    const listed = await runCli(['tasks', 'list', '--json'], { env: embeddedEnv });
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stderr).toBe(`DATABASE_URL is unset: using the embedded Postgres in ${dataDir}\n`);
    const ids = (JSON.parse(listed.stdout) as Array<{ taskId: string }>).map((t) => t.taskId);
    expect(ids.sort()).toEqual([created.taskId, waiting.taskId].sort());

    // Ctrl-C: the process exits 0 and takes its Postgres with it.
    const pgPid = postmasterPid()!;
    expect(alive(pgPid)).toBe(true);
    first.child.kill('SIGINT');
    expect(await first.exited).toBe(0);
    expect(alive(pgPid)).toBe(false);

    // With the server down, the CLI starts the embedded Postgres for itself, and stops it after.
    const shown = await runCli(['tasks', 'show', waiting.taskId], { env: embeddedEnv });
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stderr).toBe(
      `DATABASE_URL is unset: using the embedded Postgres in ${dataDir} (started for this command)\n`,
    );
    expect(shown.stdout).toContain('input_required');
    expect(postmasterPid()).toBeUndefined();

    // Killed outright, it cannot stop its Postgres: the watchdog beside Postgres does.
    const second = await start();
    const again = new RawMcp(second.url);
    expect(await again.getTask(created.taskId)).toEqual(done);
    const orphan = postmasterPid()!;
    second.child.kill('SIGKILL');
    await second.exited;
    await waitFor(() => !alive(orphan), { timeoutMs: 20_000, what: 'the orphaned Postgres to stop' });

    // Through npm itself: npm forwards SIGTERM, and the script execs node, so the server drains and exits.
    // With a dashboard on, the start log says where it is.
    const third = await start('npm', { DASHBOARD_TOKEN: 'a-dashboard-token-for-tests' });
    expect(third.listening.dashboard).toBe(new URL('/dashboard', third.url).href);
    expect(first.listening.dashboard).toBeUndefined();
    const last = new RawMcp(third.url);
    await last.result('tasks/update', {
      taskId: waiting.taskId,
      inputResponses: { confirm: { action: 'accept', content: { confirm: true } } },
    });
    expect((await last.waitForTask(waiting.taskId)).result.content[0].text).toBe(
      'confirmed: survive a restart',
    );
    const finalPg = postmasterPid()!;
    const server = serverPid(third.child.pid!);
    third.child.kill('SIGTERM'); // the npm process, as `docker stop` or a supervisor would
    expect(await third.exited).toBe(0);
    await waitFor(() => !alive(server), { timeoutMs: 20_000, what: 'the server under npm to exit' });
    expect(alive(finalPg)).toBe(false);
  }, 120_000);
});
