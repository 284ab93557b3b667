/**
 * The artifacts scenario of bench/run.ts: ctx.artifact's write, the HTTP download, and what a download costs
 * the instance's other requests, each beside Postgres doing the same through pg in the same run. A `server`
 * and a `worker` process serve `bench/lib/artifact-tools.ts` (the shipped tools and `bench_bytes`, whose
 * producer yields pre-built 64 KiB blocks, so that the producer is not what is measured).
 *
 *   - write: a `bench_bytes` task of BENCH_ARTIFACT_MB (256) MiB, from its creation to its completion (the
 *     task row's created_at → last_updated_at). Floors: the same bytes INSERTed one 1 MiB row per statement,
 *     sequentially, into a table of the same shape (bytea, storage external, the same primary key); and all of
 *     them in one `COPY … FROM STDIN (FORMAT binary)`.
 *   - download: GET of that artifact (the last round's), the body read whole and its SHA-256 checked against
 *     the link's. Floors, hashing the same bytes: the same chunks SELECTed one per statement in order with pg
 *     (which reads a bytea as text: hex, twice the bytes); and one `COPY (SELECT …) TO STDOUT (FORMAT binary)`
 *     per chunk (the bytes as they are stored).
 *   - tasks/get one request at a time on the same instance while a BENCH_ARTIFACT_DOWNLOAD_MB (1024) MiB
 *     artifact downloads (in a thread of its own, so that the poller's timings do not wait on the download's
 *     hashing), against the same polling just before with no download; with the server's garbage collection
 *     in each window (its /metrics).
 * Throughputs are the medians of BENCH_ARTIFACT_ROUNDS (3) rounds in which ours and the floors take turns (the
 * order reversed every other round); every write starts after a CHECKPOINT (when the role may run one), so that
 * none pays for the one before it.
 */
import { createHash, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import { DOWNLOAD_URL_META, SHA256_META } from '../src/core/artifacts.ts';
import { BENCH_ARTIFACT, benchBytesSha256, MIB, MIB_OF_BYTES } from './lib/artifact-tools.ts';
import { download, downloadInThread, type Download } from './lib/download.ts';
import { DURATION, fmt, rows, type Proc, type ScratchDb } from './lib/harness.ts';
import { mcpUrl, server, worker } from './lib/processes.ts';
import { pct, rpcClient } from './lib/sequential.ts';

const WRITE_MIB = Number(process.env.BENCH_ARTIFACT_MB ?? 256);
const DOWNLOAD_MIB = Number(process.env.BENCH_ARTIFACT_DOWNLOAD_MB ?? 1024);
const ROUNDS = Number(process.env.BENCH_ARTIFACT_ROUNDS ?? 3);
const WARMUP_MIB = Math.min(8, WRITE_MIB);
const TOOLS = ['--tools', 'bench/lib/artifact-tools.ts'];
const FLOOR_TABLE = 'bench_artifact_chunks';

type Rpc = ReturnType<typeof rpcClient>;

interface Link {
  size: number;
  _meta: Record<string, string>;
}

// ---- the write: ours, and the floors' ----

/** A bench_bytes task of `mebibytes` MiB, run to completion: its link, and its creation → completion (ms). */
async function writeOurs(call: Rpc, db: ScratchDb, mebibytes: number) {
  const created = await call('tools/call', { name: 'bench_bytes', arguments: { mebibytes } }, 'bench_bytes');
  const taskId = created.taskId as string;
  const deadline = Date.now() + 600_000;
  let task = await call('tasks/get', { taskId }, taskId);
  while (task.status === 'working') {
    if (Date.now() > deadline) throw new Error(`bench_bytes ${mebibytes} MiB: still working after 600 s`);
    await sleep(20);
    task = await call('tasks/get', { taskId }, taskId);
  }
  if (task.status !== 'completed') throw new Error(`bench_bytes ended ${String(task.status)}`);
  const link = (task.result as { content: Link[] }).content[0]!;
  if (link.size !== mebibytes * MIB || link._meta[SHA256_META] !== benchBytesSha256(mebibytes))
    throw new Error(
      `bench_bytes ${mebibytes} MiB: the link's size or SHA-256 is not that of the bytes written`,
    );
  const [{ ms }] = (await db.sql(
    `select extract(epoch from last_updated_at - created_at)::float8 * 1000 as ms from tasks where task_id = $1`,
    [taskId],
  )) as [{ ms: number }];
  return { taskId, link, ms };
}

/** The floor: one INSERT per 1 MiB row, one after the other (each its own commit, as ours). */
async function insertFloor(client: pg.Client, mebibytes: number): Promise<number> {
  const id = randomUUID();
  const started = performance.now();
  for (let seq = 0; seq < mebibytes; seq++)
    await client.query(`insert into ${FLOOR_TABLE} (artifact_id, seq, data) values ($1, $2, $3)`, [
      id,
      seq,
      MIB_OF_BYTES,
    ]);
  return performance.now() - started;
}

/** PostgreSQL's binary COPY format: the signature, no flags, no header extension. */
const COPY_SIGNATURE = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)]);

function* copyRows(id: string, mebibytes: number): Generator<Buffer> {
  yield COPY_SIGNATURE;
  const uuid = Buffer.from(id.replaceAll('-', ''), 'hex');
  for (let seq = 0; seq < mebibytes; seq++) {
    const head = Buffer.alloc(2 + 4 + 16 + 4 + 4 + 4);
    let at = head.writeInt16BE(3, 0);
    at = head.writeInt32BE(16, at);
    at += uuid.copy(head, at);
    at = head.writeInt32BE(4, at);
    at = head.writeInt32BE(seq, at);
    head.writeInt32BE(MIB, at);
    yield head;
    yield MIB_OF_BYTES;
  }
  yield Buffer.from([0xff, 0xff]);
}

/** The bulk floor: every row in one binary COPY (one statement, one commit). */
async function copyFloor(client: pg.Client, mebibytes: number): Promise<number> {
  const started = performance.now();
  await pipeline(
    Readable.from(copyRows(randomUUID(), mebibytes)),
    client.query(copyFrom(`copy ${FLOOR_TABLE} (artifact_id, seq, data) from stdin (format binary)`)),
  );
  return performance.now() - started;
}

// ---- the download: ours, and the floors' ----

async function hashChunks(chunks: number, read: (seq: number) => Promise<Buffer>): Promise<Download> {
  const started = performance.now();
  const hash = createHash('sha256');
  let bytes = 0;
  for (let seq = 0; seq < chunks; seq++) {
    const data = await read(seq);
    hash.update(data);
    bytes += data.length;
  }
  return { bytes, sha256: hash.digest('hex'), ms: performance.now() - started };
}

const CHUNK_SQL = 'select data from task_artifact_chunks where artifact_id = $1 and seq = $2';

/** The floor: one SELECT per chunk, in order, as pg reads a bytea (text format: hex). */
const selectFloor = (client: pg.Client, artifactId: string, chunks: number) =>
  hashChunks(chunks, async (seq) => {
    const { rows: found } = await client.query<{ data: Buffer }>(CHUNK_SQL, [artifactId, seq]);
    return found[0]!.data;
  });

/** The binary floor: one `COPY (SELECT …) TO STDOUT (FORMAT binary)` per chunk, its one field cut out. */
const copyOutFloor = (client: pg.Client, artifactId: string, chunks: number) =>
  hashChunks(chunks, async (seq) => {
    const out = client.query(
      copyTo(
        `copy (${CHUNK_SQL.replace('$1', `'${artifactId}'`).replace('$2', String(seq))}) to stdout (format binary)`,
      ),
    );
    const pieces: Buffer[] = [];
    for await (const piece of out) pieces.push(piece as Buffer);
    const all = Buffer.concat(pieces);
    // Signature (19 bytes), then the row: its field count (2), the field's length (4) and bytes; then -1 (2).
    const length = all.readInt32BE(19 + 2);
    if (all.length !== 19 + 2 + 4 + length + 2) throw new Error(`chunk ${seq}: unexpected COPY output`);
    return all.subarray(19 + 2 + 4, 19 + 2 + 4 + length);
  });

function checked(d: Download, link: Link, what: string): Download {
  if (d.bytes !== link.size || d.sha256 !== link._meta[SHA256_META])
    throw new Error(
      `${what}: ${d.bytes} bytes, SHA-256 ${d.sha256}; the link says ${link.size} bytes, ${link._meta[SHA256_META]}`,
    );
  return d;
}

// ---- tasks/get beside a download ----

/** tasks/get latencies (ms), one request at a time, until `until()` says stop. */
async function pollTask(call: Rpc, taskId: string, until: () => boolean): Promise<number[]> {
  const latencies: number[] = [];
  while (!until()) {
    const started = performance.now();
    await call('tasks/get', { taskId }, taskId);
    latencies.push(performance.now() - started);
  }
  return latencies;
}

interface GcSoFar {
  seconds: number;
  major: number;
}

/** The server process's garbage collection so far (its /metrics: prom-client's default metrics). */
async function gcSoFar(srv: Proc): Promise<GcSoFar> {
  const text = await (await fetch(`http://127.0.0.1:${srv.port}/metrics`)).text();
  const gc: GcSoFar = { seconds: 0, major: 0 };
  for (const line of text.split('\n')) {
    if (line.startsWith('nodejs_gc_duration_seconds_sum')) gc.seconds += Number(line.split(' ').at(-1));
    if (line.startsWith('nodejs_gc_duration_seconds_count{kind="major"}'))
      gc.major = Number(line.split(' ').at(-1));
  }
  return gc;
}

const gcBetween = (a: GcSoFar, b: GcSoFar) =>
  `the server's GC ${(b.seconds - a.seconds).toFixed(2)} s (${b.major - a.major} major)`;

const forSeconds = (s: number) => {
  const end = Date.now() + s * 1000;
  return () => Date.now() >= end;
};

// ---- the table ----

const median = (xs: number[]) => pct(xs, 50);
const mibPerSecond = (mebibytes: number, ms: number) => mebibytes / (ms / 1000);
/** The median rate, and every round's when there were several. */
const rates = (xs: number[]) =>
  `${median(xs).toFixed(0)} MiB/s` + (xs.length > 1 ? ` (${xs.map((x) => x.toFixed(0)).join(', ')})` : '');
const latencies = (xs: number[]) =>
  `p50 ${pct(xs, 50).toFixed(2)} ms, p99 ${pct(xs, 99).toFixed(2)} ms (${xs.length.toLocaleString('en')} gets)`;

/** Runs `steps` in order, or in reverse order in odd rounds, `ROUNDS` times. */
async function inTurns(steps: (() => Promise<void>)[]): Promise<void> {
  for (let round = 0; round < ROUNDS; round++)
    for (const step of round % 2 === 0 ? steps : [...steps].reverse()) await step();
}

/** What the three parts share: the scratch database, a pg client of its own, the server and its client. */
interface Bench {
  db: ScratchDb;
  client: pg.Client;
  srv: Proc;
  call: Rpc;
}

/** CHECKPOINT needs a superuser or pg_checkpoint: without it, the writes take their chances alike. */
const checkpoint = (db: ScratchDb) =>
  db.sql('checkpoint').then(
    () => {},
    () => {},
  );

/** 1. The write (after a small one of each, to warm the processes, pools and JIT); the last of ours returned. */
async function benchWrite({ db, client, call }: Bench) {
  await writeOurs(call, db, WARMUP_MIB);
  await insertFloor(client, WARMUP_MIB);
  await copyFloor(client, WARMUP_MIB);
  const write = { ours: [] as number[], insert: [] as number[], copy: [] as number[] };
  let written: Awaited<ReturnType<typeof writeOurs>> | undefined;
  const timed = (into: number[], run: () => Promise<number>) => async () => {
    await checkpoint(db);
    into.push(mibPerSecond(WRITE_MIB, await run()));
  };
  await inTurns([
    timed(write.insert, () => insertFloor(client, WRITE_MIB)),
    timed(write.copy, () => copyFloor(client, WRITE_MIB)),
    timed(write.ours, async () => (written = await writeOurs(call, db, WRITE_MIB)).ms),
  ]);
  rows.push(
    {
      scenario: `ctx.artifact write, ${WRITE_MIB} MiB in 64 KiB blocks (bench_bytes), tools/call → completed`,
      ours: rates(write.ours),
      floor: `pg, one INSERT per 1 MiB row, sequential: ${rates(write.insert)}`,
      ratio: fmt.x(median(write.ours) / median(write.insert)),
      target: '≥ 0.5×',
    },
    {
      scenario: `the same write, against one binary COPY`,
      ours: rates(write.ours),
      floor: `pg, COPY FROM STDIN (FORMAT binary), all ${WRITE_MIB} MiB: ${rates(write.copy)}`,
      ratio: fmt.x(median(write.ours) / median(write.copy)),
      target: '',
    },
  );
  return written!;
}

/** 2. The download of `written`, and the same chunks read by pg. */
async function benchDownload({ db, client }: Bench, written: { taskId: string; link: Link }) {
  const [{ artifact_id: artifactId, chunks }] = (await db.sql(
    `select artifact_id, chunks from task_artifacts where task_id = $1 and name = $2`,
    [written.taskId, BENCH_ARTIFACT],
  )) as [{ artifact_id: string; chunks: number }];
  const read = { ours: [] as number[], select: [] as number[], copy: [] as number[] };
  const downloaded = (into: number[], what: string, run: () => Promise<Download>) => async () =>
    void into.push(mibPerSecond(WRITE_MIB, checked(await run(), written.link, what).ms));
  await inTurns([
    downloaded(read.ours, 'the download', () => download(written.link._meta[DOWNLOAD_URL_META]!)),
    downloaded(read.select, 'the SELECTs', () => selectFloor(client, artifactId, chunks)),
    downloaded(read.copy, 'the COPYs', () => copyOutFloor(client, artifactId, chunks)),
  ]);
  rows.push(
    {
      scenario: `artifact download (GET), ${WRITE_MIB} MiB read whole, SHA-256 checked`,
      ours: rates(read.ours),
      floor: `pg, one SELECT per chunk in order (hex text), hashed: ${rates(read.select)}`,
      ratio: fmt.x(median(read.ours) / median(read.select)),
      target: '≥ 0.5×',
    },
    {
      scenario: `the same download, against binary COPY per chunk`,
      ours: rates(read.ours),
      floor: `pg, COPY (SELECT chunk) TO STDOUT (FORMAT binary), hashed: ${rates(read.copy)}`,
      ratio: fmt.x(median(read.ours) / median(read.copy)),
      target: '',
    },
  );
}

/** 3. tasks/get of a task, one at a time: no download, then while its DOWNLOAD_MIB artifact downloads. */
async function benchGetBesideDownload({ db, srv, call }: Bench) {
  await checkpoint(db);
  const { taskId, link } = await writeOurs(call, db, DOWNLOAD_MIB);
  await pollTask(call, taskId, forSeconds(1));
  const gc0 = await gcSoFar(srv);
  const idle = await pollTask(call, taskId, forSeconds(DURATION));
  const gc1 = await gcSoFar(srv);
  let started = false;
  let done = false;
  const during = downloadInThread(link._meta[DOWNLOAD_URL_META]!, () => (started = true)).finally(
    () => (done = true),
  );
  const deadline = Date.now() + 60_000;
  while (!started && !done && Date.now() < deadline) await sleep(5);
  const busy = await pollTask(call, taskId, () => done);
  const downloaded = checked(await during, link, 'the download beside tasks/get');
  const gc2 = await gcSoFar(srv);
  rows.push({
    scenario: `tasks/get, one at a time, while ${DOWNLOAD_MIB} MiB download from the same instance`,
    ours:
      `${latencies(busy)}; the download ${mibPerSecond(DOWNLOAD_MIB, downloaded.ms).toFixed(0)} MiB/s; ` +
      gcBetween(gc1, gc2),
    floor: `no download, just before: ${latencies(idle)}; ${gcBetween(gc0, gc1)}`,
    ratio: `p50 ${fmt.x(pct(busy, 50) / pct(idle, 50))}, p99 ${fmt.x(pct(busy, 99) / pct(idle, 99))}`,
    target: 'p99 ≤ 1.5×',
  });
}

/** Each part's rows are in the table as soon as it ends: a part that fails leaves the ones before it. */
export async function benchArtifacts(db: ScratchDb): Promise<void> {
  await db.sql(`create table ${FLOOR_TABLE} (artifact_id uuid not null, seq integer not null,
    data bytea not null, primary key (artifact_id, seq))`);
  await db.sql(`alter table ${FLOOR_TABLE} alter column data set storage external`);
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  const srv = await server(db, {}, [], TOOLS);
  // A worker-only process has no origin of its own for the links it makes: the server's.
  const wrk = await worker(db, { METRICS_PORT: '', PUBLIC_URL: `http://127.0.0.1:${srv.port}` }, TOOLS);
  try {
    const bench: Bench = { db, client, srv, call: rpcClient(mcpUrl(srv)) };
    await benchDownload(bench, await benchWrite(bench));
    await benchGetBesideDownload(bench);
  } finally {
    await Promise.all([wrk.stop(), srv.stop(), client.end()]);
  }
}
