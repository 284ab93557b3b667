/**
 * Sends oversized POSTs to a running server and counts what the clients saw: every one should read the
 * 413 JSON-RPC error, none a reset. The same clients as test/http/body-limit.test.ts.
 *
 *   node --import tsx scripts/oversized-bodies.ts [url] [--requests=200] [--concurrency=16]
 *     [--size=5000000] [--max-body-bytes=1000000] [--pid=<server pid>]
 *
 * With --pid (a server on this machine), the server's RSS is printed after each run: it should not
 * grow with the bytes the server discards.
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
} from '../test/helpers/oversized.ts';

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
const url = positionals[0] ?? 'http://127.0.0.1:3000/mcp';
const n = Number(values.requests);
const concurrency = Number(values.concurrency);
const size = Number(values.size);
const max = Number(values['max-body-bytes']);

const body = paddedRequest(size);
const dir = await mkdtemp(join(tmpdir(), 'oversized-'));
const file = join(dir, 'body.json');
await writeFile(file, body);

/** The server's resident set size, when its pid was given. */
const rss = (): string =>
  values.pid === undefined
    ? ''
    : ` (server ${/VmRSS:\s+(\d+ kB)/.exec(readFileSync(`/proc/${values.pid}/status`, 'utf8'))?.[1]})`;

const runs: Array<[string, () => Promise<Outcome>]> = [
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
let failed = false;
if (values.pid !== undefined) console.log(`before${rss()}`);
try {
  for (const [name, job] of runs) {
    const { outcomes, counts } = await tally(n, concurrency, job);
    const read = outcomes.filter((o) => isBodyLimit413(o, max)).length;
    if (read !== n) failed = true;
    const uploaded = outcomes.flatMap((o) =>
      'uploaded' in o && o.uploaded !== undefined ? [o.uploaded] : [],
    );
    const most = uploaded.length > 0 ? `, curl uploaded at most ${Math.max(...uploaded)} bytes` : '';
    console.log(`${name}: ${read}/${n} read the 413${most}${rss()}`, counts);
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
process.exitCode = failed ? 1 : 0;
