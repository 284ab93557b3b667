import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export const ROOT = path.resolve(import.meta.dirname, '../..');

/** A process of the cluster under test: an HTTP instance or a worker. */
export interface ClusterProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  /** Marks the next exit as the test's own doing (a SIGKILL, a restart), not a crash. */
  expectExit(): void;
}

export interface UnexpectedExit {
  name: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The last lines the process wrote to stderr: the stack of an unhandled error. */
  stderrTail: string;
}

/**
 * Starts and tracks the cluster's processes. Any exit the test did not cause is recorded: under the
 * database faults these tests inject, no process may ever exit by itself.
 */
export class Processes {
  readonly #children = new Map<ChildProcess, () => void>();
  readonly unexpectedExits: UnexpectedExit[] = [];
  readonly #baseEnv: Record<string, string>;

  constructor(baseEnv: Record<string, string>) {
    this.#baseEnv = baseEnv;
  }

  start(name: string, args: string[], env: Record<string, string> = {}): ClusterProcess {
    const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
      cwd: ROOT,
      env: { ...process.env, ...this.#baseEnv, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let tail = '';
    let errorLines = 0;
    child.stderr?.on('data', (d: Buffer) => {
      const text = d.toString();
      tail = (tail + text).slice(-4000);
      for (const line of text.split('\n')) {
        if (!line.includes('"level":"error"')) continue;
        // Expected during an outage (requests fail with -32603); a few show what the clients saw.
        if (++errorLines <= 3) console.log(`  ${name}: ${line.slice(0, 300)}`);
        else if (errorLines === 4) console.log(`  ${name}: (further error lines not shown)`);
      }
    });
    let expected = false;
    const expectExit = () => (expected = true);
    this.#children.set(child, expectExit);
    const exited = new Promise<void>((resolve) =>
      child.once('exit', (code, signal) => {
        this.#children.delete(child);
        if (!expected) {
          this.unexpectedExits.push({ name, code, signal, stderrTail: tail });
          console.log(`  ${name} EXITED (code ${code}, signal ${signal}):\n${tail.slice(-1500)}`);
        }
        resolve();
      }),
    );
    return { name, child, exited, expectExit };
  }

  /** Ends every process still running (SIGTERM, then SIGKILL after `graceMs`). */
  async stopAll(graceMs = 10_000): Promise<void> {
    const running = [...this.#children.keys()];
    for (const [c, expectExit] of this.#children) {
      expectExit();
      c.kill('SIGTERM');
    }
    const kill = setTimeout(() => running.forEach((c) => c.kill('SIGKILL')), graceMs);
    await Promise.all(
      running.map((c) =>
        c.exitCode !== null ? Promise.resolve() : new Promise<void>((r) => c.once('exit', () => r())),
      ),
    );
    clearTimeout(kill);
  }

  /** Whether the process runs: it has not exited. */
  static alive(p: ClusterProcess): boolean {
    return p.child.exitCode === null && p.child.signalCode === null;
  }
}

/** Waits until something answers HTTP on the port. */
export async function waitHttp(port: number, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await fetch(`http://127.0.0.1:${port}/mcp`, { method: 'GET' });
      return;
    } catch {
      if (Date.now() > deadline) throw new Error(`port ${port} never answered`);
      await sleep(100);
    }
  }
}
