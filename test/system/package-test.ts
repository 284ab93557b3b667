/**
 * The package as a user gets it: `npm pack`, installed into a fresh project outside the repository
 * (no access to its sources), a tool written there in TypeScript, served with one command and driven by
 * an independent client (@modelcontextprotocol/ext-tasks); then the same tools as separate migrate,
 * server and worker processes on a real Postgres, and the CLI's `call` against them.
 *
 *   npm run test:package
 */
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  createApplicationInputHandler,
  resultFromTaskOutcome,
  withTasks,
} from '@modelcontextprotocol/ext-tasks/client';
import type { JsonValue } from '@modelcontextprotocol/ext-tasks/core';
import { extTasksPort } from '../helpers/ext-tasks.ts';
import { freePort } from '../helpers/ports.ts';
import { waitFor } from '../helpers/wait.ts';
import { ROOT, startCommand, type Command } from '../helpers/system/cluster.ts';
import { databaseOn } from '../helpers/system/database.ts';

const ADMIN_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const work = mkdtempSync(path.join(tmpdir(), 'durable-mcp-tasks-package-'));
chmodSync(work, 0o755); // as root, the embedded Postgres runs as the postgres user, who must reach its data
const project = path.join(work, 'my-app');
const commands: Command[] = [];
let failed = false;

function check(ok: boolean, what: string, detail?: unknown): void {
  process.stdout.write(
    `${ok ? 'ok  ' : 'FAIL'} ${what}${ok || detail === undefined ? '' : `: ${JSON.stringify(detail)}`}\n`,
  );
  if (!ok) failed = true;
}

function sh(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): string {
  return execFileSync(cmd, args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/** Starts `npx durable-mcp-tasks <args>` in the project; `ready` resolves with the first group of `ready`. */
function startBin(args: string[], env: Record<string, string>, ready: RegExp): Command {
  const command = startCommand('npx', ['--no-install', 'durable-mcp-tasks', ...args], {
    cwd: project,
    env: { ...cleanEnv(), ...env },
    ready,
  });
  commands.push(command);
  return command;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Whether a process with this command line runs. */
function running(commandLine: string): boolean {
  try {
    execFileSync('pgrep', ['-f', commandLine], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Whether `probe` holds within 30 s. */
const until = (probe: () => boolean): Promise<boolean> =>
  waitFor(probe, { timeoutMs: 30_000, intervalMs: 100 }).catch(() => false);

/** The environment of a user's shell: nothing from this repository's tooling (no tsx loader). */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  delete env.DATABASE_URL;
  for (const k of Object.keys(env)) if (k.startsWith('npm_')) delete env[k];
  env.DURABLE_MCP_TASKS_STATE_DIR = path.join(work, 'state'); // `call` records its tasks here, not in ~
  return env;
}

// ------------------------------------------------------------------------------------------------
// An independent client: @modelcontextprotocol/ext-tasks over the suite's fetch port.

type Obj = { readonly [key: string]: JsonValue };

async function runTask(url: string, tool: string, args: Obj, answer?: Obj) {
  const asked: unknown[] = [];
  const session = withTasks(extTasksPort(url, { clientInfo: { name: 'package-test', version: '0.0.0' } }), {
    onInputRequest: createApplicationInputHandler({
      elicitation: async (request) => {
        asked.push(request.params);
        return { action: 'accept', content: answer ?? {} } as never;
      },
      sampling: async () => {
        throw new Error('no sampling here');
      },
      roots: async () => ({ roots: [] }),
    }),
  });
  try {
    const ex = await session.callTool(tool, args);
    const { outcome } = await ex.settle();
    return { kind: ex.kind, status: outcome.status, result: resultFromTaskOutcome(outcome), asked };
  } finally {
    await session.close();
  }
}

// ------------------------------------------------------------------------------------------------

const TOOLS_TS = `import { defineTool, NonRetryableError, type ToolDefinition } from 'durable-mcp-tasks';
import { z } from 'zod';

/** A data job: counts words in steps, with a status message per step, and characters in a map of the lines. */
const wordCount = defineTool({
  name: 'word_count',
  description: 'Counts the words of a text, one durable step per line.',
  inputSchema: z.object({ text: z.string() }),
  taskSupport: 'required',
  async handler({ text }, ctx) {
    let words = 0;
    const lines = text.split('\\n');
    for (const [i, line] of lines.entries()) {
      words += await ctx.step(\`line-\${i}\`, () => line.split(/\\s+/).filter(Boolean).length, {
        retry: { maxAttempts: 3, backoff: { initialMs: 100 }, retryIf: (e) => !(e instanceof NonRetryableError) },
        timeoutMs: 10_000,
      });
      ctx.status(\`\${i + 1}/\${lines.length} lines\`);
    }
    await ctx.sleep('settle', 200);
    const lengths = await ctx.map('lengths', lines, (line) => line.length, { concurrency: 2 });
    return {
      content: [{ type: 'text', text: \`\${words} words\` }],
      structuredContent: { words, characters: lengths.reduce((a, b) => a + b, 0) },
    };
  },
});

/** Asks before it acts. */
const approve = defineTool({
  name: 'approve_payment',
  description: 'Asks the user to approve a payment.',
  inputSchema: z.object({ amount: z.number().positive() }),
  taskSupport: 'required',
  async handler({ amount }, ctx) {
    const answer = await ctx.elicit('approve', {
      message: \`Pay \${amount} EUR?\`,
      requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
    });
    const ok = answer.action === 'accept' && answer.content?.ok === true;
    return { content: [{ type: 'text', text: ok ? \`paid \${amount}\` : 'not paid' }] };
  },
});

export const tools: ToolDefinition<any>[] = [wordCount, approve];
`;

/** A host on the client library: calls a tool as a task, keeps its id in a file store, reads it back. */
const clientTs = (
  url: string,
  stateDir: string,
) => `import { FileTaskStore, TasksClient } from 'durable-mcp-tasks/client';

const client = new TasksClient({ url: ${JSON.stringify(url)}, store: new FileTaskStore(${JSON.stringify(stateDir)}) });
const outcome = await client.callTool('word_count', { text: 'a b' });
const [record] = await client.records();
const pending = (await client.pending()).length;
console.log(JSON.stringify({ status: outcome.status, result: outcome.result, record, pending }));
`;

try {
  // 1. The tarball: what it ships.
  const packed = JSON.parse(
    sh('npm', ['pack', '--json', '--pack-destination', work], ROOT, {
      ...process.env,
      npm_config_loglevel: 'error',
    }),
  ) as Array<{ filename: string; files: Array<{ path: string }> }>;
  const files = packed[0]!.files.map((f) => f.path);
  const tarball = path.join(work, packed[0]!.filename);
  check(
    files.includes('dist/src/index.js') && files.includes('dist/src/index.d.ts'),
    'the tarball has dist/src/index.js and its types',
  );
  check(files.includes('dist/src/cli/main.js'), 'the tarball has the bin');
  check(
    files.some((f) => f.startsWith('dist/migrations/') && f.endsWith('.js')),
    'the tarball has compiled migrations',
  );
  check(
    !files.some((f) => /(^|\/)test\/|\.test\.|^scripts\/|^bench\/|^src\//.test(f)),
    'no tests, scripts or TypeScript sources',
    files.filter((f) => /test|^src\//.test(f)),
  );
  process.stdout.write(`     ${files.length} files, ${path.basename(tarball)}\n`);

  // 2. A fresh project, as a user makes one.
  sh('mkdir', ['-p', project], work);
  writeFileSync(
    path.join(project, 'package.json'),
    JSON.stringify({ name: 'my-app', private: true, type: 'module' }, null, 2),
  );
  sh(
    'npm',
    ['install', '--no-audit', '--no-fund', '--loglevel=error', tarball, 'zod@4'],
    project,
    cleanEnv(),
  );
  writeFileSync(path.join(project, 'tools.ts'), TOOLS_TS);
  writeFileSync(path.join(project, 'client.ts'), clientTs('http://127.0.0.1:1/mcp', work));
  writeFileSync(
    path.join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        module: 'nodenext',
        target: 'es2023',
        strict: true,
        noEmit: true,
        skipLibCheck: false,
        types: [],
      },
      include: ['tools.ts', 'client.ts'],
    }),
  );
  // The user's tool type-checks against the package's declarations (tsc from this repo; no sources).
  let typeErrors = '';
  try {
    execFileSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', project], {
      cwd: project,
      encoding: 'utf8',
    });
  } catch (err) {
    typeErrors = String((err as { stdout?: string }).stdout ?? err);
  }
  check(typeErrors === '', 'tools.ts and client.ts type-check against the installed package', typeErrors);
  const help = sh('npx', ['--no-install', 'durable-mcp-tasks', 'start', '--help'], project, cleanEnv());
  check(
    /DATABASE_URL/.test(help) && /WORKER_CONCURRENCY\s+default 32/.test(help),
    '`start --help` lists the environment with defaults',
  );

  // The same tools.ts in a project made by `npm init -y`, which says "type": "commonjs": Node loads the
  // module as CommonJS and cannot; the bin says what to do in one line.
  const commonjs = path.join(work, 'commonjs-app');
  sh('mkdir', ['-p', commonjs], work);
  sh('npm', ['init', '-y'], commonjs, cleanEnv());
  writeFileSync(path.join(commonjs, 'tools.ts'), TOOLS_TS);
  symlinkSync(path.join(project, 'node_modules'), path.join(commonjs, 'node_modules'));
  const untyped = spawnSync(
    process.execPath,
    ['node_modules/.bin/durable-mcp-tasks', 'start', '--tools', './tools.ts'],
    { cwd: commonjs, env: cleanEnv(), encoding: 'utf8', timeout: 60_000, killSignal: 'SIGKILL' },
  );
  check(
    untyped.status === 1 &&
      untyped.stderr.trim().split('\n').length === 1 &&
      untyped.stderr.includes('add "type": "module"'),
    'a tools.ts in a project made by npm init -y ("type": "commonjs"): one line that says what to do',
    untyped.stderr,
  );

  // An old Node: one clear line from the installed bin, not a stack trace.
  const oldNode = process.env.OLD_NODE ?? '/usr/bin/node';
  if (existsSync(oldNode)) {
    const old = spawnSync(oldNode, ['node_modules/.bin/durable-mcp-tasks', 'start'], {
      cwd: project,
      encoding: 'utf8',
    });
    const version = execFileSync(oldNode, ['--version'], { encoding: 'utf8' }).trim();
    if (/^v(1\d|2[01])\.|^v22\.(\d|1[01])\./.test(version)) {
      check(
        old.status === 1 &&
          old.stderr.trim().split('\n').length === 1 &&
          old.stderr.includes(`this is ${version.slice(1)}`),
        `the bin on Node ${version}: one line, exit 1`,
        old.stderr,
      );
    }
  }

  // 3. One command: HTTP + workers + an embedded Postgres.
  const pgPort = String(await freePort());
  const one = startBin(
    ['start', '--tools', './tools.ts', '--port', '0'],
    {
      EMBEDDED_PG_DIR: path.join(work, 'pg'),
      EMBEDDED_PG_PORT: pgPort,
    },
    /"msg":"listening","url":"([^"]+)"/,
  );
  const url = await one.ready;
  const counted = await runTask(url, 'word_count', { text: 'durable tasks\non postgres\nin typescript' });
  check(
    counted.kind === 'task' && counted.status === 'completed',
    'word_count ran as a task to completed',
    counted,
  );
  check(
    JSON.stringify(counted.result).includes('6 words') &&
      JSON.stringify(counted.result).includes('"characters":37'),
    'word_count result (its ctx.map of the lines included)',
    counted.result,
  );
  const paid = await runTask(url, 'approve_payment', { amount: 42 }, { ok: true });
  check(
    paid.status === 'completed' && paid.asked.length === 1,
    'approve_payment asked for input once and completed',
    paid,
  );
  check(JSON.stringify(paid.result).includes('paid 42'), 'approve_payment result', paid.result);
  // SIGTERM to npx: npm's shell dies without passing it on; the server notices its parent is gone and
  // drains, and its embedded Postgres stops with it.
  const postmaster = Number(readFileSync(path.join(work, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  one.child.kill('SIGTERM');
  await one.exited;
  const gone = await until(
    () => !running(`${project}/node_modules/.bin/durable-mcp-tasks start`) && !alive(postmaster),
  );
  check(
    gone && /"msg":"shutting down"/.test(one.output()),
    'SIGTERM to npx: the server drains and exits, its Postgres stops',
    one.output().slice(-400),
  );

  // 4. The same tools as separate processes on a real Postgres: migrate, server, worker.
  const database = await databaseOn(ADMIN_URL, 'package_test');
  const env = { DATABASE_URL: database.url, MIGRATE_ON_START: 'false' };
  sh('npx', ['--no-install', 'durable-mcp-tasks', 'migrate'], project, { ...cleanEnv(), ...env });
  check(true, '`migrate` ran');
  const server = startBin(
    ['server', '--tools', './tools.ts', '--port', '0'],
    env,
    /"msg":"listening","url":"([^"]+)"/,
  );
  const worker = startBin(['worker', '--tools', './tools.ts'], env, /"msg":"started"()/);
  const serverUrl = await server.ready;
  await worker.ready;
  const split = await runTask(serverUrl, 'approve_payment', { amount: 7 }, { ok: true });
  check(
    split.status === 'completed' && JSON.stringify(split.result).includes('paid 7'),
    'server + worker processes complete a task with input',
    split,
  );
  const viaCli = execFileSync(
    'npx',
    [
      '--no-install',
      'durable-mcp-tasks',
      'call',
      'word_count',
      '--arg',
      'text=one two three',
      '--url',
      serverUrl,
    ],
    {
      cwd: project,
      env: cleanEnv(),
      encoding: 'utf8',
    },
  );
  check(viaCli.trim() === '3 words' && viaCli.endsWith('\n'), '`call` prints the result', viaCli);
  writeFileSync(path.join(project, 'client.ts'), clientTs(serverUrl, path.join(work, 'client-state')));
  const host = JSON.parse(sh('node', ['client.ts'], project, cleanEnv())) as {
    status: string;
    result: unknown;
    record?: { tool: string; shownAt?: string };
    pending: number;
  };
  check(
    host.status === 'completed' &&
      JSON.stringify(host.result).includes('2 words') &&
      host.record?.tool === 'word_count' &&
      host.record.shownAt !== undefined &&
      host.pending === 0,
    'durable-mcp-tasks/client runs a task and keeps its record in a FileTaskStore',
    host,
  );
  server.child.kill('SIGTERM');
  worker.child.kill('SIGTERM');
  // As with `start` above: npx goes at once, the processes under it notice and drain.
  await Promise.all([server.exited, worker.exited]);
  const bin = `${project}/node_modules/.bin/durable-mcp-tasks`;
  const drained = await until(
    () =>
      !running(`${bin} server`) &&
      !running(`${bin} worker`) &&
      /"msg":"shutting down"/.test(server.output()) &&
      /"msg":"shutting down"/.test(worker.output()),
  );
  check(drained, 'SIGTERM to npx: the server and the worker drain and exit', {
    server: server.output().slice(-600),
    worker: worker.output().slice(-600),
  });
  await database.stop();
} catch (err) {
  check(false, 'package test', String((err as Error).stack ?? err));
} finally {
  for (const { child } of commands) if (child.exitCode === null) child.kill('SIGKILL');
  if (!failed) rmSync(work, { recursive: true, force: true });
  else process.stdout.write(`kept ${work} for inspection\n`);
}
process.exit(failed ? 1 : 0);
