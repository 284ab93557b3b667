/**
 * The README's walkthrough, run as written: the bash block after `<!-- walkthrough -->` is extracted and
 * executed against a real `npm start` (embedded Postgres), so the README cannot drift from the server.
 *
 *   npm run test:readme
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '../helpers/ports.ts';
import { waitFor } from '../helpers/wait.ts';
import { ROOT, startCommand } from '../helpers/system/cluster.ts';

const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const block = /<!-- walkthrough -->\s*```sh\n([\s\S]*?)```/.exec(readme)?.[1];
if (block === undefined) throw new Error('README.md has no ```sh block after <!-- walkthrough -->');

const dir = mkdtempSync(path.join(tmpdir(), 'readme-walkthrough-'));
chmodSync(dir, 0o755); // as root, the embedded Postgres runs as the postgres user, who must reach its data
const env: NodeJS.ProcessEnv = {
  ...process.env,
  PORT: String(await freePort()),
  EMBEDDED_PG_DIR: path.join(dir, 'postgres'),
  EMBEDDED_PG_PORT: String(await freePort()),
};
delete env.DATABASE_URL;
const server = startCommand('npm', ['start'], { cwd: ROOT, env, ready: /"msg":"listening","url":"([^"]+)"/ });
const url = await server.ready;

let failed = false;
const check = (ok: boolean, what: string, detail?: string) => {
  process.stdout.write(`${ok ? 'ok  ' : 'FAIL'} ${what}\n`);
  if (!ok) {
    failed = true;
    if (detail !== undefined) process.stdout.write(`${detail}\n`);
  }
};

try {
  const run = spawnSync('bash', ['-euo', 'pipefail', '-c', block], {
    cwd: ROOT,
    env: { ...process.env, URL: url },
    encoding: 'utf8',
    timeout: 180_000,
  });
  process.stdout.write(`--- the walkthrough's output\n${run.stdout}--- (stderr)\n${run.stderr}---\n`);
  check(run.status === 0, `the block exits 0 (got ${run.status})`);
  check(run.stdout.endsWith('\n'), 'its output ends with a newline');
  const lines = run.stdout.split('\n');
  for (const expected of [
    /^task [A-Za-z0-9_-]{20,}$/,
    /^\{"jsonrpc":"2\.0","id":1,"result":\{"resultType":"complete","taskId":"[^"]+","status":"working"/,
    /^Analyzed 1000000 values in 10 chunks: sum=500000644810 /,
    /^Do you confirm this action: deploy\?$/,
    /^\{"jsonrpc":"2\.0","id":1,"result":\{"resultType":"complete"/,
    /^confirmed: deploy$/,
    /^cancelled$/,
    /^Analyzed 500000 values in 5 chunks: /,
  ]) {
    check(
      lines.some((l) => expected.test(l)),
      `a line matches ${expected}`,
    );
  }
  check(!/-32\d\d\d/.test(run.stdout), 'no JSON-RPC error in the replies');
} finally {
  server.child.kill('SIGTERM');
  check((await server.exited) === 0, 'npm start exits 0 on SIGTERM');
}

// The README's way to run on an old Node: the machine's own npx (Node 20 here) fetches Node 24 for one command.
const oldNode = process.env.OLD_NODE ?? '/usr/bin/node';
const viaNpx = /`(npx -y node@24 [^`]+)`/.exec(readme)?.[1];
check(viaNpx !== undefined, 'the README says how to run on an old Node');
if (viaNpx !== undefined && existsSync(oldNode)) {
  const pathEnv = `${path.dirname(oldNode)}:${process.env.PATH ?? ''}`;
  const version = execFileSync(oldNode, ['--version'], { encoding: 'utf8' }).trim();
  const started = startCommand('bash', ['-c', viaNpx], {
    cwd: ROOT,
    env: { ...env, PATH: pathEnv, PORT: String(await freePort()) },
    ready: /"msg":"listening"()/,
    timeoutMs: 120_000,
  });
  const up = await started.ready.then(
    () => true,
    () => false,
  );
  const out = started.output();
  check(up, `\`${viaNpx}\` serves, run from a shell whose node is ${version}`, out.slice(-2000));
  if (started.child.exitCode === null) started.child.kill('SIGTERM');
  await started.exited;
  // npx's shell does not pass SIGTERM on; the server notices its parent is gone and drains.
  const stopped = await waitFor(() => !/src\/cli\/main\.ts start/.test(ps()), {
    timeoutMs: 30_000,
    intervalMs: 200,
  }).catch(() => false);
  check(stopped, 'and stops when npx is stopped');
}
rmSync(dir, { recursive: true, force: true });

function ps(): string {
  return execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
}
process.exit(failed ? 1 : 0);
