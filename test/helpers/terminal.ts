// Commands in a real pseudo-terminal (tmux): what a user sees on screen, the keys they press, and a
// process killed the way a closed terminal or a crash kills it.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';
import { ROOT } from './cli.ts';

export interface TerminalWindow {
  /** The screen as it is now. */
  screen: () => string;
  /** The command's exit status once it ended. */
  exitCode: () => string | undefined;
  /** Types keys (tmux send-keys names: `Enter`, `C-c`). */
  keys: (...keys: string[]) => void;
  /** SIGKILLs the command (the terminal stays, as after a crash). */
  kill: () => void;
}

const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** A tmux server of this test file's own, killed after its tests. */
export function useTerminals() {
  const socket = `test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const dir = mkdtempSync(path.join(tmpdir(), 'tty-'));
  const tmux = (...args: string[]) => execFileSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' });
  afterAll(() => {
    try {
      tmux('kill-server');
    } catch {
      // no session left
    }
  });
  return {
    /** Runs `argv` in a new 100×20 window `name` from the repository root. */
    open(name: string, argv: readonly string[]): TerminalWindow {
      const status = path.join(dir, `${name}.status`);
      const pidFile = path.join(dir, `${name}.pid`);
      // `exec` in a subshell: the pid written is the command's own. The status is renamed into place, so
      // that it is never read half written.
      const command = `sh -c 'echo $$ > ${pidFile}; exec "$@"' sh ${argv.map(quote).join(' ')}; echo $? > ${quote(`${status}.tmp`)}; mv ${quote(`${status}.tmp`)} ${quote(status)}; sleep 60`;
      tmux('new-session', '-d', '-s', name, '-x', '100', '-y', '20', '-c', ROOT, command);
      return {
        screen: () => tmux('capture-pane', '-p', '-t', name),
        exitCode: () => (existsSync(status) ? readFileSync(status, 'utf8').trim() : undefined),
        keys: (...keys) => void tmux('send-keys', '-t', name, ...keys),
        kill: () => process.kill(Number(readFileSync(pidFile, 'utf8').trim()), 'SIGKILL'),
      };
    },
  };
}
