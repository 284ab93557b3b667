// The CLI as a child process, the way a user runs it: one helper for the tests that drive it.
import { spawn } from 'node:child_process';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '../..');

/** `node --import tsx src/cli/main.ts`: the bin, run from source. */
export const CLI = [process.execPath, '--import', 'tsx', path.join(ROOT, 'src/cli/main.ts')] as const;

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `command args…` from the repository root to its end: its exit code and everything it wrote.
 * `env` goes over this process's environment; `input` is its standard input (closed at once without).
 */
export function run(
  command: string,
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; input?: string } = {},
): Promise<Run> {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, ...opts.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdin.end(opts.input ?? '');
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

/** Runs the CLI with `args`. */
export const runCli = (args: readonly string[], opts: { env?: NodeJS.ProcessEnv; input?: string } = {}) =>
  run(CLI[0], [...CLI.slice(1), ...args], opts);
