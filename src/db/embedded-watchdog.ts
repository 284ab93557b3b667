import { spawn } from 'node:child_process';

// Runs beside Postgres: when its owner dies without stopping it (SIGKILL, a crash), Postgres is stopped
// (fast, then immediate) rather than left serving. It exits by itself once Postgres is gone.
const WATCHDOG = `
const [owner, postmaster] = process.argv.slice(1).map(Number);
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch (e) { return e.code === 'EPERM'; } };
let stoppingSince = 0;
setInterval(() => {
  if (!alive(postmaster)) process.exit(0);
  if (alive(owner)) return;
  const now = Date.now();
  if (stoppingSince === 0) { stoppingSince = now; try { process.kill(postmaster, 'SIGINT'); } catch {} }
  else if (now - stoppingSince > 15000) { try { process.kill(postmaster, 'SIGQUIT'); } catch {} }
}, 250);
`;

/** Starts the parent-death watchdog of an embedded Postgres (a tiny detached node process). */
export function watchOwner(owner: number, postmaster: number): void {
  spawn(process.execPath, ['-e', WATCHDOG, String(owner), String(postmaster)], {
    detached: true,
    stdio: 'ignore',
    env: {},
  }).unref();
}
