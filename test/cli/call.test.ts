// `durable-mcp-tasks call`: the CLI client against a real server, as a child process (plain output) and
// under tmux (a real pseudo-terminal: the progress bar, the prompt, Ctrl-C).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { hashToken } from '../../src/http/auth/static-tokens.ts';
import { defineTool } from '../../src/tools/define.ts';
import { CLI, runCli, type Run } from '../helpers/cli.ts';
import { countTasks } from '../helpers/db.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { useTerminals, type TerminalWindow } from '../helpers/terminal.ts';

/** This file's task records (never the user's own state folder). */
const STATE_DIR = mkdtempSync(path.join(tmpdir(), 'cli-call-state-'));

/** Runs `call …` with stdin from `input` (closed at once when none), without a terminal. */
function call(args: string[], opts: { input?: string; env?: Record<string, string> } = {}): Promise<Run> {
  const env = { MCP_TOKEN: '', DURABLE_MCP_TASKS_STATE_DIR: STATE_DIR, ...opts.env };
  return runCli(['call', ...args], { ...opts, env });
}

describe('call, without a terminal', () => {
  const server = useTestServer();
  const url = () => ['--url', server.rt.url];

  it('runs a task, prints a plain line per status change on stderr and the result on stdout', async () => {
    const run = await call([
      'analyze_numbers',
      '--arg',
      'count=300000',
      '--arg',
      'delayMsPerChunk=150',
      ...url(),
    ]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^Analyzed 300000 values in 3 chunks: sum=\d+ .*\n$/);
    expect(run.stderr).toContain('working: chunk 1/3');
    expect(run.stderr).toContain('completed: chunk 3/3');
  });

  it('prints an artifact link as its name, type, size and download URL (its event first, live)', async () => {
    const run = await call(['export_csv', '--arg', 'megabytes=1', ...url()]);
    expect(run.code, run.stderr).toBe(0);
    const origin = new URL(server.rt.url).origin;
    const link = `export.csv \\(text/csv; charset=utf-8, 1\\.0 MiB\\): ${origin}/mcp/artifacts/[\\w-]+/export.csv`;
    expect(run.stdout).toMatch(
      new RegExp(`^artifact ${link}\nExported \\d+ bytes to export.csv\n${link}\n$`),
    );
  });

  it('keeps a string argument a string (the schema says so) and prints JSON with --json', async () => {
    const run = await call(['echo', '--arg', 'text=42', '--json', ...url()]);
    expect(run.code, run.stderr).toBe(0);
    const outcome = JSON.parse(run.stdout) as { status: string; result: { content: unknown[] } };
    expect(outcome.status).toBe('completed');
    expect(outcome.result.content).toEqual([{ type: 'text', text: '42' }]);
    const viaArgs = await call(['echo', '--args', '{"text":"from --args"}', ...url()]);
    expect(viaArgs.stdout).toBe('from --args\n');
  });

  it('exits 1 when the task fails or its result is an error', async () => {
    const protocol = await call(['fail_with', '--arg', 'kind=protocol', ...url()]);
    expect(protocol.code).toBe(1);
    expect(protocol.stderr).toMatch(/failed: .*Protocol error, as requested/);
    const tool = await call(['fail_with', '--arg', 'kind=tool', '--json', ...url()]);
    expect(tool.code).toBe(1);
    expect(JSON.parse(tool.stdout)).toMatchObject({ status: 'failed', result: { isError: true } });
    // Arguments the tool's schema rejects are a tool error (isError), as the spec has it.
    const invalid = await call(['echo', '--args', '{"text":7}', ...url()]);
    expect(invalid.code).toBe(1);
    expect(invalid.stdout).toContain('Invalid arguments for tool echo');
  });

  it('exits 2 on usage and connection errors, naming the problem', async () => {
    const unknown = await call(['no_such_tool', '--arg', 'x=1', ...url()]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no tool named no_such_tool; the server has: analyze_numbers');
    const badFlag = await call(['echo', '--arg', 'novalue', ...url()]);
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toContain('expected key=value');
    const unreachable = await call(['echo', '--arg', 'text=x', '--url', 'http://127.0.0.1:9/mcp']);
    expect(unreachable.code).toBe(2);
    expect(unreachable.stderr).toContain('cannot reach http://127.0.0.1:9/mcp');
  });

  it('refuses an argument the tool does not take in one line, with the one meant, and calls nothing', async () => {
    const before = await countTasks(server.tdb.db);
    for (const [args, line] of [
      [['export_csv', '--arg', 'mib=2'], 'unknown argument mib (did you mean megabytes?)'],
      [['export_csv', '--arg', 'megabyte=2'], 'unknown argument megabyte (did you mean megabytes?)'],
      [
        ['analyze_numbers', '--arg', 'count=5', '--arg', 'chunksize=1'],
        'unknown argument chunksize (did you mean chunkSize?)',
      ],
      [['echo', '--args', '{"text":"hi","zzz":1}'], 'unknown argument zzz; echo takes text'],
    ] as Array<[string[], string]>) {
      const run = await call([...args, ...url()]);
      expect({ code: run.code, stderr: run.stderr, stdout: run.stdout }).toEqual({
        code: 2,
        stderr: `durable-mcp-tasks call: ${line}\n`,
        stdout: '',
      });
    }
    expect(await countTasks(server.tdb.db)).toBe(before);
  });

  it('reads answers to the task’s questions from stdin, and declines when stdin ends', async () => {
    const accepted = await call(['confirm_action', '--arg', 'action=deploy', ...url()], { input: 'y\n' });
    expect(accepted.code, accepted.stderr).toBe(0);
    expect(accepted.stdout).toBe('confirmed: deploy\n');
    expect(accepted.stderr).toContain('? Do you confirm this action: deploy?');
    const declined = await call(['confirm_action', '--arg', 'action=deploy', ...url()]);
    expect(declined.stdout).toBe('declined: deploy\n');
  });
});

describe('call, a tool whose published schema does not say it takes no other arguments', () => {
  // The CLI cannot tell `txt` is not an argument of it: the server's refusal is what the user reads.
  const opaque = defineTool({
    name: 'opaque',
    description: 'Echoes its text; its JSON Schema is written by hand (test tool)',
    inputSchema: z.object({ text: z.string() }),
    inputJsonSchema: { type: 'object', properties: { text: { type: 'string' } } },
    handler: ({ text }) => ({ content: [{ type: 'text', text }] }),
  });
  const server = useTestServer({ tools: [opaque] });

  it('prints the server’s refusal as the one line of its result, and exits 1', async () => {
    const run = await call(['opaque', '--arg', 'txt=hi', '--url', server.rt.url]);
    expect(run).toEqual({
      code: 1,
      stdout: 'Invalid arguments for tool opaque: unknown argument "txt" (it takes "text")\n',
      stderr: '',
    });
  });
});

describe('call, with bearer auth', () => {
  const server = useTestServer({
    env: { AUTH_MODE: 'bearer', AUTH_TOKENS: `cli=${hashToken('cli-secret')}` },
  });

  it('asks for a token when the server wants one, and uses --token or MCP_TOKEN', async () => {
    const none = await call(['echo', '--arg', 'text=x', '--url', server.rt.url]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('pass a bearer token with --token or MCP_TOKEN');
    const wrong = await call([
      'echo',
      '--arg',
      'text=x',
      '--token',
      'not-the-secret',
      '--url',
      server.rt.url,
    ]);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr.trim().split('\n')).toHaveLength(1);
    expect(wrong.stderr).toContain('refused the token given');
    const flag = await call(['echo', '--arg', 'text=x', '--token', 'cli-secret', '--url', server.rt.url]);
    expect(flag.stdout).toBe('x\n');
    const env = await call(['echo', '--arg', 'text=y', '--url', server.rt.url], {
      env: { MCP_TOKEN: 'cli-secret' },
    });
    expect(env.stdout).toBe('y\n');
  });
});

describe('call, in a terminal (tmux)', () => {
  const server = useTestServer();
  const terminals = useTerminals();

  /** Starts `call …` in a new tmux window. */
  function inTerminal(name: string, args: string[]): TerminalWindow {
    return terminals.open(name, [...CLI, 'call', ...args, '--url', server.rt.url, '--state-dir', STATE_DIR]);
  }

  async function until<T>(
    what: string,
    get: () => T | undefined | null | false,
    timeoutMs = 20_000,
  ): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = get();
      if (v !== undefined && v !== null && v !== false) return v;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async function statusOf(tool: string): Promise<string[]> {
    const rows = await server.tdb.db
      .selectFrom('tasks')
      .select('status')
      .where('tool_name', '=', tool)
      .execute();
    return rows.map((r) => r.status);
  }

  it('prompts for the form, re-asks on a bad answer, and completes', async () => {
    const t = inTerminal('prompt', ['confirm_action', '--arg', 'action=ship it']);
    await until('the prompt', () => t.screen().includes('Confirm (y/n):'));
    expect(t.screen()).toContain('? Do you confirm this action: ship it?');
    t.keys('maybe', 'Enter');
    await until('the re-ask', () => t.screen().includes('answer y or n'));
    t.keys('y', 'Enter');
    expect(await until('exit', t.exitCode)).toBe('0');
    expect(t.screen()).toContain('confirmed: ship it');
  });

  it('draws a progress bar in place, and Ctrl-C cancels the task (exit 130)', async () => {
    const t = inTerminal('progress', [
      'analyze_numbers',
      '--arg',
      'count=1000000',
      '--arg',
      'delayMsPerChunk=2000',
    ]);
    const bar = await until('the progress bar', () =>
      /analyze_numbers {2}\[#+-+\] \d+% {2}chunk \d+\/10/.exec(t.screen()),
    );
    expect(bar[0]).toBeDefined();
    // One line redrawn in place, not a line per update.
    expect(t.screen().match(/analyze_numbers/g)).toHaveLength(1);
    t.keys('C-c');
    expect(await until('exit', t.exitCode)).toBe('130');
    expect(t.screen()).toMatch(/cancelling task \S+…\ncancelled/);
    expect(await statusOf('analyze_numbers')).toEqual(['cancelled']);
  });

  it('Ctrl-C at a prompt cancels the task waiting for the answer', async () => {
    const t = inTerminal('interrupt', ['confirm_action', '--arg', 'action=interrupted']);
    await until('the prompt', () => t.screen().includes('Confirm (y/n):'));
    t.keys('C-c');
    expect(await until('exit', t.exitCode)).toBe('130');
    const rows = await server.tdb.db
      .selectFrom('tasks')
      .select('status')
      .where('tool_name', '=', 'confirm_action')
      .where('arguments', '@>', JSON.stringify({ action: 'interrupted' }))
      .execute();
    expect(rows.map((r) => r.status)).toEqual(['cancelled']);
  });
});
