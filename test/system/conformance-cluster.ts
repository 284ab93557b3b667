/**
 * The official conformance suite against two instances behind a real nginx, round-robin, no
 * stickiness (`npm run conformance:cluster`, run by .ci/run): at 2025-11-25 every request of a session
 * (its GET stream, the client's answers to the server's elicitation and sampling requests, the resumed
 * stream of `test_reconnection`, the DELETE) may land on the other instance. Both instances (each
 * `npm run conformance:server`: HTTP and workers, the conformance fixture) share one database; nothing
 * is sticky. Prints how many requests each instance served.
 *
 *   node --import tsx test/system/conformance-cluster.ts
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { ROOT, startCluster } from '../helpers/system/cluster.ts';

const cluster = await startCluster({
  name: 'conformance',
  workers: 0,
  pooler: 'none',
  instance: ['test/conformance/server.ts'],
  env: { HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
});
let code = 1;
try {
  const url = cluster.url.replace('127.0.0.1', 'localhost');
  console.log(`nginx ${url} → instances :${cluster.ports.join(', :')} (round-robin, no stickiness)`);
  code = await new Promise<number>((resolve) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(ROOT, 'test/conformance/run.ts'), '--url', url],
      { stdio: 'inherit', cwd: ROOT },
    );
    child.once('exit', (c) => resolve(c ?? 1));
  });
  const served = [...cluster.nginx!.served().values()];
  console.log(`requests served per instance: ${served.join(', ')}`);
  if (served.some((n) => n === 0)) {
    console.log('an instance served nothing: the balancer did not spread the sessions');
    code = 1;
  }
  if (cluster.unexpectedExits.length > 0) {
    console.log(
      `instances that exited by themselves: ${cluster.unexpectedExits.map((e) => e.name).join(', ')}`,
    );
    code = 1;
  }
} finally {
  await cluster.stop();
}
process.exit(code);
