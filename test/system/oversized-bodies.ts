/**
 * Oversized POSTs at volume (`npm run test:oversized`, run by .ci/run): every one must read the 413
 * JSON-RPC error, none a reset; counted per client kind (fetch with Content-Length, fetch chunked, curl
 * without and with `Expect: 100-continue`). The same clients as test/http/body-limit.test.ts.
 *
 * Without a URL it starts its own server process (MAX_BODY_BYTES = --max-body-bytes) behind real nginx
 * and sends to both, printing the server's RSS after each run: it should not grow with the bytes the
 * server discards. With a URL it sends to that server (--pid: a server on this machine whose RSS to
 * print). Exits non-zero if any request did not read the 413.
 *
 *   node --import tsx test/system/oversized-bodies.ts [url] [--requests=200] [--concurrency=16]
 *     [--size=5000000] [--max-body-bytes=1000000] [--pid=<server pid>]
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  chunkedBody,
  curlOutcome,
  curlPostArgs,
  fetchOutcome,
  isBodyLimit413,
  MCP_POST_HEADERS,
  paddedRequest,
  tally,
  type Outcome,
} from '../helpers/oversized.ts';
import { startCluster, type Cluster } from '../helpers/system/cluster.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    requests: { type: 'string', default: '200' },
    concurrency: { type: 'string', default: '16' },
    size: { type: 'string', default: '5000000' },
    'max-body-bytes': { type: 'string', default: '1000000' },
    pid: { type: 'string' },
  },
});
const n = Number(values.requests);
const concurrency = Number(values.concurrency);
const size = Number(values.size);
const max = Number(values['max-body-bytes']);

let cluster: Cluster | undefined;
const targets: Array<{ name: string; url: string }> = [];
let pid = values.pid;
if (positionals[0] !== undefined) targets.push({ name: positionals[0], url: positionals[0] });
else {
  cluster = await startCluster({
    name: 'oversized',
    instances: 1,
    workers: 0,
    pooler: 'none',
    env: { LOG_LEVEL: 'warn', MAX_BODY_BYTES: String(max) },
  });
  pid = String(cluster.http[0]!.pid);
  targets.push(
    { name: 'the server', url: `http://127.0.0.1:${cluster.ports[0]}/mcp` },
    { name: 'nginx in front', url: cluster.url },
  );
}

const body = paddedRequest(size);
const dir = await mkdtemp(join(tmpdir(), 'oversized-'));
const file = join(dir, 'body.json');
await writeFile(file, body);

/** The server's resident set size, when its pid is known. */
const rss = (): string =>
  pid === undefined
    ? ''
    : ` (server ${/VmRSS:\s+(\d+ kB)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]})`;

const runs = (url: string): Array<[string, () => Promise<Outcome>]> => [
  ['fetch, Content-Length', () => fetchOutcome(url, { method: 'POST', headers: MCP_POST_HEADERS, body })],
  [
    'fetch, chunked',
    () =>
      fetchOutcome(url, {
        method: 'POST',
        headers: MCP_POST_HEADERS,
        body: chunkedBody(body.subarray(0, 64 * 1024), size),
        duplex: 'half',
      }),
  ],
  ['curl, Content-Length, no Expect', () => curlOutcome(curlPostArgs(url, file, ['-H', 'Expect:']))],
  ['curl, Expect: 100-continue', () => curlOutcome(curlPostArgs(url, file))],
];
let failed = 0;
let passed = 0;
if (pid !== undefined) console.log(`before${rss()}`);
try {
  for (const target of targets) {
    console.log(`--- ${target.name}: ${target.url}`);
    for (const [name, job] of runs(target.url)) {
      const { outcomes, counts } = await tally(n, concurrency, job);
      const read = outcomes.filter((o) => isBodyLimit413(o, max)).length;
      passed += read;
      failed += n - read;
      const uploaded = outcomes.flatMap((o) =>
        'uploaded' in o && o.uploaded !== undefined ? [o.uploaded] : [],
      );
      const most = uploaded.length > 0 ? `, curl uploaded at most ${Math.max(...uploaded)} bytes` : '';
      console.log(`${name}: ${read}/${n} read the 413${most}${rss()}`, counts);
    }
  }
  if (cluster !== undefined && cluster.unexpectedExits.length > 0) {
    console.log('the server exited by itself');
    failed++;
  }
} finally {
  await rm(dir, { recursive: true, force: true });
  await cluster?.stop();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
