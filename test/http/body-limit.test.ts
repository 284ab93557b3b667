import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mcpBodyLimit } from '../../src/http/app.ts';
import { guardNodeServer, type LingerOptions } from '../../src/http/node-server.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { RawMcp } from '../helpers/mcp.ts';
import {
  chunkedBody,
  curlOutcome,
  curlPostArgs,
  fetchOutcome,
  isBodyLimit413,
  MCP_POST_HEADERS,
  paddedRequest,
  RawUpload,
  tally,
  type Outcome,
} from '../helpers/oversized.ts';
import { freePort } from '../helpers/ports.ts';
import { waitFor } from '../helpers/wait.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const MAX_BODY_BYTES = 1_000_000;
const BIG = 5_000_000;
const REQUESTS = 200;
const CONCURRENCY = 16;
/** How much the server's RSS may grow while it discards ~2.5 GB: far less than what it discards. */
const RSS_GROWTH_BOUND = 100 * 1024 * 1024;

const big = paddedRequest(BIG);
let dir: string;
let bigFile: string;
let tdb: TestDatabase;
let child: ChildProcess;
let exited: Promise<void>;
let url: string;
let mcp: RawMcp;
let baselineRss: number;

/** The resident set size of process `pid`, from /proc (the server runs in its own process for this). */
function rssBytes(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (kb === undefined) throw new Error(`no VmRSS for ${pid}`);
  return Number(kb) * 1024;
}

async function stillServes(): Promise<void> {
  expect((await mcp.result('server/discover')).resultType).toBe('complete');
}

function expectAll413(outcomes: Outcome[], counts: Record<string, number>, n: number): void {
  expect(
    outcomes.filter((o) => isBodyLimit413(o, MAX_BODY_BYTES)),
    JSON.stringify(counts),
  ).toHaveLength(n);
}

/** How much the server's RSS grew since the warm-up (logged, to compare runs). */
function rssGrowth(): number {
  const rss = rssBytes(child.pid!);
  const mib = (n: number) => (n / 2 ** 20).toFixed(1);
  console.log(`server RSS: ${mib(rss)} MiB (after warm-up ${mib(baselineRss)})`);
  return rss - baselineRss;
}

const postBig = () => fetchOutcome(url, { method: 'POST', headers: MCP_POST_HEADERS, body: big });
const postChunked = () =>
  fetchOutcome(url, {
    method: 'POST',
    headers: MCP_POST_HEADERS,
    body: chunkedBody(big.subarray(0, 64 * 1024), BIG),
    duplex: 'half',
  });

describe('oversized request bodies (the server process, MAX_BODY_BYTES=1000000)', () => {
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'body-limit-'));
    bigFile = path.join(dir, 'big.json');
    await writeFile(bigFile, big);
    tdb = await createTestDatabase();
    const port = await freePort();
    url = `http://127.0.0.1:${port}/mcp`;
    mcp = new RawMcp(url);
    // The real server process, so that its memory is its own and readable from /proc.
    child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', '--role=server'], {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: tdb.url,
        HOST: '127.0.0.1',
        PORT: String(port),
        MAX_BODY_BYTES: String(MAX_BODY_BYTES),
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    exited = new Promise((resolve) => child.once('exit', () => resolve()));
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}`);
        return (await fetchOutcome(url, { method: 'GET' }).then((o) => 'status' in o)) || undefined;
      },
      { timeoutMs: 60_000, what: 'the server listening' },
    );
    // Warm-up: the baseline is the RSS of a server that has already served oversized requests.
    await tally(64, CONCURRENCY, postBig);
    await tally(32, CONCURRENCY, postChunked);
    baselineRss = rssBytes(child.pid!);
  }, 90_000);

  afterAll(async () => {
    if (child?.exitCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    await tdb?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  it(`${REQUESTS} fetch POSTs of 5 MB with Content-Length, ${CONCURRENCY} at a time, all read the 413`, async () => {
    const { outcomes, counts } = await tally(REQUESTS, CONCURRENCY, postBig);
    console.log('fetch, 5 MB with Content-Length:', counts);
    const growth = rssGrowth();
    expectAll413(outcomes, counts, REQUESTS);
    await stillServes();
    expect(growth).toBeLessThan(RSS_GROWTH_BOUND);
  }, 120_000);

  it(`${REQUESTS} curl POSTs of 5 MB that send the body anyway (no Expect), all read the 413`, async () => {
    const args = curlPostArgs(url, bigFile, ['-H', 'Expect:']);
    const { outcomes, counts } = await tally(REQUESTS, CONCURRENCY, () => curlOutcome(args));
    console.log('curl, 5 MB with Content-Length, no Expect:', counts);
    const growth = rssGrowth();
    expectAll413(outcomes, counts, REQUESTS);
    await stillServes();
    expect(growth).toBeLessThan(RSS_GROWTH_BOUND);
  }, 120_000);

  it('curl with Expect: 100-continue reads the 413 without uploading the body', async () => {
    // curl's default for a body this big: it waits for 100 Continue, which must never come.
    const args = curlPostArgs(url, bigFile);
    const { outcomes, counts } = await tally(50, CONCURRENCY, () => curlOutcome(args));
    console.log('curl, 5 MB with Expect: 100-continue:', counts);
    expectAll413(outcomes, counts, 50);
    const uploaded = outcomes.map((o) => ('uploaded' in o ? o.uploaded : undefined));
    expect(
      uploaded.filter((u) => u !== 0),
      'body bytes curl uploaded',
    ).toEqual([]);
    await stillServes();
  }, 60_000);

  it('50 chunked bodies of 5 MB that cross the limit all read the 413', async () => {
    const { outcomes, counts } = await tally(50, CONCURRENCY, postChunked);
    console.log('fetch, 5 MB chunked:', counts);
    const growth = rssGrowth();
    expectAll413(outcomes, counts, 50);
    await stillServes();
    expect(growth).toBeLessThan(RSS_GROWTH_BOUND);
  }, 60_000);
});

/** Bounds that never end a test's connection: each test below lowers the one it is about. */
const NEVER: Required<LingerOptions> = { maxBytes: 1024 * 2 ** 20, maxMs: 600_000, idleMs: 600_000 };

/**
 * A guarded server in this process with the MCP body limit (the real 413) and a route that answers
 * small bodies, which tells, per client port, how many bytes the server read before it closed.
 */
async function guardedServer(linger: LingerOptions) {
  const app = new Hono();
  app.post('/mcp', mcpBodyLimit(MAX_BODY_BYTES), (c) => c.json({ ok: true }));
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  guardNodeServer(server, { maxBodyBytes: MAX_BODY_BYTES, linger });
  const readBeforeClose = new Map<number, number>();
  server.on('connection', (socket: Socket) => {
    const port = socket.remotePort!;
    socket.once('close', () => readBeforeClose.set(port, socket.bytesRead));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  return {
    url,
    /** Bytes the server read from `client` before closing it; undefined while it is open. */
    readFrom: (client: RawUpload) => readBeforeClose.get(client.localPort),
    /** The server answers a small request, whatever other clients are doing. */
    async serves(): Promise<void> {
      const o = await fetchOutcome(url, { method: 'POST', headers: MCP_POST_HEADERS, body: '{}' });
      expect(o).toEqual({ status: 200, body: '{"ok":true}' });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as HttpServer).closeAllConnections();
      }),
  };
}

/** A client that declares 5 MB, sends 64 KB and reads the 413 the server answers at once. */
async function refusedUpload(url: string): Promise<RawUpload> {
  const client = await RawUpload.open(url, BIG);
  await client.write(big.subarray(0, 64 * 1024));
  expect(isBodyLimit413(await client.response, MAX_BODY_BYTES)).toBe(true);
  return client;
}

describe('lingering close (guardNodeServer, in this process)', () => {
  it('reads and discards the rest of the body after the 413 until the client closes, without a reset', async () => {
    const server = await guardedServer(NEVER);
    try {
      const client = await refusedUpload(server.url);
      // The server has answered and sent its FIN; the client keeps sending, as a client would.
      expect(await client.write(big.subarray(64 * 1024))).toBeUndefined();
      client.socket.end();
      expect(await client.closed).toBeUndefined();
      const read = await waitFor(() => server.readFrom(client), { what: 'the server closed the client' });
      expect(read).toBeGreaterThan(BIG);
      await server.serves();
    } finally {
      await server.close();
    }
  });

  it('closes a client that stops sending after the idle bound', async () => {
    const server = await guardedServer({ ...NEVER, idleMs: 200 });
    try {
      const client = await refusedUpload(server.url);
      await server.serves();
      await waitFor(() => server.readFrom(client) !== undefined, { what: 'the idle client closed' });
      await server.serves();
    } finally {
      await server.close();
    }
  });

  it('closes a client that keeps dribbling after the total bound', async () => {
    const server = await guardedServer({ ...NEVER, maxMs: 300 });
    try {
      const client = await refusedUpload(server.url);
      let at = 64 * 1024;
      // A byte every few milliseconds: never idle, never many bytes.
      const dribble = setInterval(() => void client.write(big.subarray(at, ++at)), 5);
      try {
        await server.serves();
        await waitFor(() => server.readFrom(client) !== undefined, { what: 'the dribbling client closed' });
      } finally {
        clearInterval(dribble);
      }
      await server.serves();
    } finally {
      await server.close();
    }
  });

  it('closes a client that floods past the byte bound', async () => {
    const server = await guardedServer({ ...NEVER, maxBytes: 1_000_000 });
    try {
      const client = await refusedUpload(server.url);
      void client.write(big.subarray(64 * 1024));
      const read = await waitFor(() => server.readFrom(client), { what: 'the flooding client closed' });
      // It read past the 413 up to the bound, not to the end of the body.
      expect(read).toBeGreaterThan(1_000_000);
      expect(read).toBeLessThan(BIG);
      await server.serves();
    } finally {
      await server.close();
    }
  });
});
