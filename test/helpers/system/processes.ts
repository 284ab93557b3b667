import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { waitFor } from '../wait.ts';

export const ROOT = path.resolve(import.meta.dirname, '../../..');

export interface UnexpectedExit {
  name: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The last lines the process wrote to stderr: the stack of an unhandled error. */
  stderrTail: string;
}

export interface StartOptions {
  /** Script and arguments after `node --import tsx`, from the repository root. */
  args: string[];
  env?: Record<string, string>;
  /** Node flags before `--import tsx` (e.g. `--expose-gc`). */
  nodeArgs?: string[];
  /** The HTTP port it serves on: `restart()` waits until it answers again. */
  port?: number;
}

/**
 * A process of the system under test (an HTTP instance, a worker): started with `node --import tsx`
 * from the repository root. Any exit the test did not ask for (`kill`, `restart`, `stopAll`) is recorded
 * by its `Processes`.
 */
export class ClusterProcess {
  child!: ChildProcess;
  /** Resolves when the current child exits. */
  exited!: Promise<void>;
  #expected = false;
  #tail = '';
  readonly #lineListeners: Array<(line: string) => void> = [];

  constructor(
    readonly name: string,
    readonly opts: StartOptions,
    readonly owner: Processes,
  ) {
    this.onLine((line) => owner.errorLine(name, line));
    this.#spawn();
  }

  get port(): number | undefined {
    return this.opts.port;
  }

  get pid(): number {
    return this.child.pid ?? 0;
  }

  /** Whether the process runs: it has not exited. */
  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The last 4,000 characters it wrote to stderr. */
  get stderrTail(): string {
    return this.#tail;
  }

  /** Calls `listener` with every line the process writes to stderr from now on. */
  onLine(listener: (line: string) => void): void {
    this.#lineListeners.push(listener);
  }

  /** Marks the next exit as the test's own doing, not a crash. */
  expectExit(): void {
    this.#expected = true;
  }

  /** Sends `signal` (SIGKILL by default) as the test's own doing; resolves when the process has exited. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    this.expectExit();
    if (this.alive) this.child.kill(signal);
    await this.exited;
  }

  /** Stops the process (SIGTERM) if it runs, starts it again, and waits for its HTTP port if it has one. */
  async restart(): Promise<void> {
    await this.kill('SIGTERM');
    this.#spawn();
    if (this.opts.port !== undefined) await waitHttp(this.opts.port);
  }

  #spawn(): void {
    const { args, env = {}, nodeArgs = [] } = this.opts;
    const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', ...args], {
      cwd: ROOT,
      env: { ...process.env, ...this.owner.baseEnv, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    this.child = child;
    this.#expected = false;
    let partial = '';
    child.stderr?.on('data', (d: Buffer) => {
      const text = d.toString();
      this.#tail = (this.#tail + text).slice(-4000);
      const lines = (partial + text).split('\n');
      partial = lines.pop()!;
      for (const line of lines) for (const listener of this.#lineListeners) listener(line);
    });
    this.owner.track(this);
    this.exited = new Promise<void>((resolve) =>
      child.once('exit', (code, signal) => {
        this.owner.untrack(this);
        if (!this.#expected)
          this.owner.unexpectedExit({ name: this.name, code, signal, stderrTail: this.#tail });
        resolve();
      }),
    );
  }
}

/**
 * Starts and tracks the processes of a system test. Any exit the test did not cause is recorded: under
 * the faults these tests inject, no process may ever exit by itself.
 */
export class Processes {
  readonly unexpectedExits: UnexpectedExit[] = [];
  readonly #running = new Set<ClusterProcess>();
  readonly #errorLines = new Map<string, number>();

  constructor(readonly baseEnv: Record<string, string> = {}) {}

  start(name: string, opts: StartOptions): ClusterProcess {
    return new ClusterProcess(name, opts, this);
  }

  /** @internal */
  track(p: ClusterProcess): void {
    this.#running.add(p);
  }

  /** @internal */
  untrack(p: ClusterProcess): void {
    this.#running.delete(p);
  }

  /** @internal */
  unexpectedExit(exit: UnexpectedExit): void {
    this.unexpectedExits.push(exit);
    console.log(
      `  ${exit.name} EXITED (code ${exit.code}, signal ${exit.signal}):\n${exit.stderrTail.slice(-1500)}`,
    );
  }

  /** @internal A few of each process's error log lines show what its clients saw (-32603 during an outage). */
  errorLine(name: string, line: string): void {
    if (!line.includes('"level":"error"')) return;
    const n = (this.#errorLines.get(name) ?? 0) + 1;
    this.#errorLines.set(name, n);
    if (n <= 3) console.log(`  ${name}: ${line.slice(0, 300)}`);
    else if (n === 4) console.log(`  ${name}: (further error lines not shown)`);
  }

  /** Ends every process still running (SIGTERM, then SIGKILL after `graceMs`). */
  async stopAll(graceMs = 10_000): Promise<void> {
    const running = [...this.#running];
    const kill = setTimeout(() => running.forEach((p) => p.child.kill('SIGKILL')), graceMs);
    await Promise.all(running.map((p) => p.kill('SIGTERM')));
    clearTimeout(kill);
  }
}

/** Waits until something answers HTTP on the port. */
export async function waitHttp(port: number, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    () =>
      fetch(`http://127.0.0.1:${port}/mcp`, { method: 'GET' }).then(
        () => true,
        () => false,
      ),
    { timeoutMs, intervalMs: 100, what: `an answer on port ${port}` },
  );
}

/** A command of a user's shell (npm, npx), not one of ours: its output read until it says it is ready. */
export interface Command {
  readonly child: ChildProcess;
  /** The first group of `ready` in its output (stdout or stderr) once it appears; rejects on exit or timeout. */
  readonly ready: Promise<string>;
  /** Its exit code. */
  readonly exited: Promise<number | null>;
  /** Everything it wrote so far. */
  output(): string;
}

/** Starts `cmd args` and watches its output for `ready` (for `npm start`, `npx durable-mcp-tasks …`). */
export function startCommand(
  cmd: string,
  args: string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv; ready: RegExp; timeoutMs?: number },
): Command {
  const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const ready = new Promise<string>((resolve, reject) => {
    const what = `${cmd} ${args.join(' ')}`;
    const timer = setTimeout(
      () => reject(new Error(`${what}: no ${opts.ready} in time:\n${output}`)),
      opts.timeoutMs ?? 90_000,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const m = opts.ready.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(m[1] ?? '');
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited with ${code}:\n${output}`));
    });
  });
  // A command that exits after it was ready is not an error here; its caller reads `exited`.
  ready.catch(() => {});
  return { child, ready, exited, output: () => output };
}
