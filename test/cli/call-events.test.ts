// `durable-mcp-tasks call` prints a task's events while it runs, against a real server with the shipped
// scan_rows tool: its rows (a compact line per event) and its partial output (a line per batch) in the
// order the task wrote them, then the result; killed mid-stream and resumed, each line is printed once.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileTaskStore } from '../../src/client/index.ts';
import { SCAN_ROW_EVENT } from '../../src/tools/shipped/scan-rows.ts';
import { CLI, ROOT, runCli } from '../helpers/cli.ts';
import { expectedScanEvents, type ScanArgs } from '../helpers/event-reader.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { useTerminals } from '../helpers/terminal.ts';
import { waitFor } from '../helpers/wait.ts';

const argsOf = (scan: Required<ScanArgs>) => Object.entries(scan).flatMap(([k, v]) => ['--arg', `${k}=${v}`]);

/** What `call scan_rows` prints on stdout: a line per event (rows compact, partial output as text), then the result. */
function expectedOutput(scan: Required<ScanArgs>): string[] {
  const events = expectedScanEvents(scan);
  const lines = events.map((e) =>
    e.type === SCAN_ROW_EVENT
      ? `${e.type} ${JSON.stringify(e.payload)}`
      : (e.payload.content as Array<{ text: string }>)[0]!.text,
  );
  const matches = events.filter((e) => e.type === SCAN_ROW_EVENT).length;
  return [...lines, `${matches} of ${scan.rows} rows matched`];
}

describe('call, printing the task’s events', () => {
  const server = useTestServer();
  const stateDir = mkdtempSync(path.join(tmpdir(), 'cli-events-state-'));
  const options = () => ['--url', server.rt.url, '--state-dir', stateDir];
  const terminals = useTerminals();

  it('prints the rows and the partial output as plain lines in order, then the result', async () => {
    const scan = { rows: 400, batchSize: 50, batchMs: 50, threshold: 100 };
    const run = await runCli(['call', 'scan_rows', ...argsOf(scan), ...options()], {
      env: { MCP_TOKEN: '' },
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe(`${expectedOutput(scan).join('\n')}\n`);
    expect(run.stderr).toContain('completed: Scanned 400 of 400 rows');
  });

  it('killed mid-stream and resumed with --resume, prints each event once overall', async () => {
    const scan = { rows: 300, batchSize: 50, batchMs: 1_500, threshold: 100 };
    const child = spawn(CLI[0], [...CLI.slice(1), 'call', 'scan_rows', ...argsOf(scan), ...options()], {
      cwd: ROOT,
      env: { ...process.env, MCP_TOKEN: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise((resolve) => child.on('close', resolve));
    const taskId = await waitFor(() => /task (\S+) \(if this stops/.exec(stderr)?.[1], {
      timeoutMs: 20_000,
      what: () => `the task id in ${stderr}`,
    });
    // Killed between two batches: after a batch's partial line, once the cursor kept in the state folder
    // has caught up with the lines printed (each of this task's events prints as one line; seqs from 1).
    const store = new FileTaskStore(stateDir);
    const printed = () => stdout.split('\n').slice(0, -1);
    await waitFor(
      async () =>
        printed().filter((l) => l.startsWith('rows ')).length >= 2 &&
        printed().at(-1)?.startsWith('rows ') === true &&
        (await store.eventCursor(server.rt.url, taskId)) === printed().length,
      { timeoutMs: 30_000, what: () => `two batches printed and saved: ${stdout}` },
    );
    child.kill('SIGKILL');
    await exited;
    expect((await server.mcp.getTask(taskId)).status).toBe('working');
    const before = printed();

    const resumed = await runCli(['call', '--resume', taskId, ...options()], { env: { MCP_TOKEN: '' } });
    expect(resumed.code, resumed.stderr).toBe(0);
    const after = resumed.stdout.split('\n').slice(0, -1);
    expect([...before, ...after]).toEqual(expectedOutput(scan));
    expect(after.length).toBeGreaterThan(1);
  }, 90_000);

  it('in a terminal, prints the event lines above the status line', async () => {
    const scan = { rows: 30, batchSize: 10, batchMs: 300, threshold: 100 };
    const t = terminals.open('events', [...CLI, 'call', 'scan_rows', ...argsOf(scan), ...options()]);
    expect(
      await waitFor(t.exitCode, { timeoutMs: 30_000, what: () => `the call to end: ${t.screen()}` }),
    ).toBe('0');
    const screen = t.screen();
    const expected = expectedOutput(scan);
    const at = screen.indexOf(expected[0]!);
    expect(at, screen).toBeGreaterThan(-1);
    expect(screen.slice(at).split('\n').slice(0, expected.length)).toEqual(expected);
  }, 60_000);
});
