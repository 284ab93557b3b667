/**
 * Artifacts through the public API and real sockets: ctx.artifact streams a large output into Postgres and
 * returns a resource_link; its task's principal reads it with resources/read or downloads it (Range,
 * HEAD, 416); nobody else finds it by any path; a result over MAX_RESULT_BYTES becomes a link; a step over
 * MAX_STEP_BYTES fails naming the step; an attempt that dies midway leaves nothing visible; the TTL purge
 * takes the artifacts and their chunks.
 */
import { createHash, randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/index.ts';
import { hashToken } from '../../src/http/auth/static-tokens.ts';
import { exportRows } from '../../src/tools/shipped/export-csv.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { bump, count } from '../helpers/test-tools.ts';
import { waitFor } from '../helpers/wait.ts';

const MIB = 1_048_576;
const BIG_TEXT = 'x'.repeat(5 * 1_000_000);

/** A 5 MB result, with a small structuredContent. */
const bigResult = defineTool({
  name: 'big_result',
  description: 'returns a 5 MB result (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'required',
  handler: () => ({ content: [{ type: 'text', text: BIG_TEXT }], structuredContent: { rows: 5 } }),
});

/** A step whose value is over MAX_STEP_BYTES. */
const bigStep = defineTool({
  name: 'big_step',
  description: 'checkpoints 2 MB in one step (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'required',
  async handler(_args, ctx) {
    const rows = await ctx.step('load-rows', () => 'r'.repeat(2 * MIB));
    return { content: [{ type: 'text', text: String(rows.length) }] };
  },
});

/** The first attempt's source throws after three chunks; the retry writes the artifact whole. */
const crashMidArtifact = defineTool({
  name: 'crash_mid_artifact',
  description: 'dies while writing its artifact the first time (test tool)',
  inputSchema: z.object({ key: z.string() }),
  taskSupport: 'required',
  async handler({ key }, ctx) {
    bump(`attempt:${key}`);
    const first = count(`attempt:${key}`) === 1;
    async function* source() {
      for (let i = 0; i < 5; i++) {
        if (first && i === 3) {
          // Wait until the three chunks are visible to the test, then die.
          await waitFor(() => count(`seen:${key}`) > 0, { what: 'the test to look at the partial artifact' });
          throw new Error('the export query failed');
        }
        yield Buffer.alloc(MIB, i);
      }
    }
    const link = await ctx.artifact('dump.bin', source());
    return { content: [link] };
  },
});

/** A small artifact with a short TTL. */
const shortLived = defineTool({
  name: 'short_lived',
  description: 'writes a 3 MiB artifact and expires soon (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'required',
  ttlMs: 300,
  async handler(_args, ctx) {
    return { content: [await ctx.artifact('short.bin', new Uint8Array(3 * MIB).fill(7))] };
  },
});

/** An artifact past MAX_ARTIFACT_BYTES (16 MiB here). */
const tooBig = defineTool({
  name: 'too_big',
  description: 'writes 17 MiB into one artifact (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'required',
  async handler(_args, ctx) {
    async function* mebibytes() {
      for (let i = 0; i < 17; i++) yield new Uint8Array(MIB);
    }
    return { content: [await ctx.artifact('huge.bin', mebibytes())] };
  },
});

/** Bytes that are not text: every byte value, in no order (3 MiB and a bit, across chunk boundaries). */
const RANDOM_BYTES = randomBytes(3 * MIB + 123);
const binaryArtifact = defineTool({
  name: 'binary_artifact',
  description: 'writes random bytes, in odd-sized pieces (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'required',
  async handler(_args, ctx) {
    async function* pieces() {
      for (let at = 0; at < RANDOM_BYTES.length; at += 77_777) yield RANDOM_BYTES.subarray(at, at + 77_777);
    }
    return { content: [await ctx.artifact('random.bin', pieces())] };
  },
});

/** Artifacts need a task: a synchronous call gets a clear error. */
const syncArtifact = defineTool({
  name: 'sync_artifact',
  description: 'writes an artifact, task optional (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'optional',
  async handler(_args, ctx) {
    return { content: [await ctx.artifact('a.txt', 'hello')] };
  },
});

const PRINCIPALS = ['alice', 'bob'] as const;
const server = useTestServer({
  tools: [
    ...SHIPPED_TOOLS,
    bigResult,
    bigStep,
    crashMidArtifact,
    shortLived,
    tooBig,
    binaryArtifact,
    syncArtifact,
  ],
  env: {
    AUTH_MODE: 'bearer',
    AUTH_TOKENS: PRINCIPALS.map((p) => `${p}=${hashToken(`${p}-token`)}`).join(','),
    ARTIFACT_READ_MAX_BYTES: String(4 * MIB),
    MAX_ARTIFACT_BYTES: String(16 * MIB),
    TASK_PURGE_GRACE_MS: '0',
  },
});
const as = (p: string) => ({ headers: { authorization: `Bearer ${p}-token` } });
const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** A task of alice's, run to its end. */
async function finished(name: string, args: Record<string, unknown> = {}) {
  const created = await server.mcp.callTool(name, args, as('alice'));
  return waitFor(async () => {
    const t = await server.mcp.result('tasks/get', { taskId: created.taskId }, as('alice'));
    return ['completed', 'failed', 'cancelled'].includes(t.status) && t;
  });
}

function download(path: string, who: string, headers: Record<string, string> = {}, method = 'GET') {
  return fetch(new URL(path, server.rt.url), {
    method,
    headers: { authorization: `Bearer ${who}-token`, ...headers },
  });
}

async function expectedExport(megabytes: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const page of exportRows(megabytes)) parts.push(Buffer.from(page));
  return Buffer.concat(parts);
}

const artifactRows = (taskId: string) =>
  sql<{ name: string; state: string; chunks: string }>`
    select a.name, a.state, (select count(*) from task_artifact_chunks c where c.artifact_id = a.artifact_id) as chunks
    from task_artifacts a where a.task_id = ${taskId} order by a.created_at`
    .execute(server.tdb.db)
    .then((r) => r.rows.map((row) => ({ ...row, chunks: Number(row.chunks) })));

describe('artifacts', () => {
  it('streams an export into an artifact and returns its resource_link; resources/read returns it whole', async () => {
    const task = await finished('export_csv', { megabytes: 3 });
    expect(task.status).toBe('completed');
    const expected = await expectedExport(3);
    const link = task.result.content[1];
    expect(link).toEqual({
      type: 'resource_link',
      uri: `tasks://${task.taskId}/artifacts/export.csv`,
      name: 'export.csv',
      mimeType: 'text/csv; charset=utf-8',
      size: expected.length,
      _meta: {
        'dev.durable-mcp-tasks/downloadUrl': new URL(
          `/mcp/artifacts/${task.taskId}/export.csv`,
          server.rt.url,
        ).href,
        'dev.durable-mcp-tasks/sha256': sha256(expected),
      },
    });
    const templates = await server.mcp.result('resources/templates/list', {}, as('alice'));
    expect(templates.resourceTemplates).toContainEqual(
      expect.objectContaining({ uriTemplate: 'tasks://{taskId}/artifacts/{name}' }),
    );
    const read = await server.mcp.result('resources/read', { uri: link.uri }, as('alice'));
    expect(read.contents).toHaveLength(1);
    expect(read.contents[0]).toMatchObject({ uri: link.uri, mimeType: 'text/csv; charset=utf-8' });
    expect(read.contents[0].text).toBe(expected.toString('utf8'));
    expect(read.cacheScope).toBe('private');
  });

  it('downloads byte-identical, resumes with Range (206), answers HEAD, and refuses an unsatisfiable range (416)', async () => {
    const task = await finished('export_csv', { megabytes: 5 });
    const link = task.result.content[1];
    const url = link._meta['dev.durable-mcp-tasks/downloadUrl'];
    const expected = await expectedExport(5);

    const whole = await download(url, 'alice');
    expect(whole.status).toBe(200);
    expect(whole.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(whole.headers.get('content-length')).toBe(String(expected.length));
    expect(whole.headers.get('accept-ranges')).toBe('bytes');
    expect(whole.headers.get('etag')).toBe(`"${sha256(expected)}"`);
    expect(sha256(Buffer.from(await whole.arrayBuffer()))).toBe(sha256(expected));

    // A range across a chunk boundary, and an open-ended one from the middle of a chunk.
    const start = MIB - 10;
    const part = await download(url, 'alice', { range: `bytes=${start}-${start + 99}` });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes ${start}-${start + 99}/${expected.length}`);
    expect(Buffer.from(await part.arrayBuffer())).toEqual(expected.subarray(start, start + 100));
    const rest = await download(url, 'alice', {
      range: `bytes=${3 * MIB + 5}-`,
      'if-range': `"${sha256(expected)}"`,
    });
    expect(rest.status).toBe(206);
    expect(Buffer.from(await rest.arrayBuffer())).toEqual(expected.subarray(3 * MIB + 5));
    const tail = await download(url, 'alice', { range: 'bytes=-7' });
    expect(Buffer.from(await tail.arrayBuffer())).toEqual(expected.subarray(expected.length - 7));
    // If-Range naming other bytes: the whole artifact.
    const stale = await download(url, 'alice', { range: 'bytes=0-9', 'if-range': '"0000"' });
    expect(stale.status).toBe(200);
    await stale.body?.cancel();

    const beyond = await download(url, 'alice', { range: `bytes=${expected.length}-` });
    expect(beyond.status).toBe(416);
    expect(beyond.headers.get('content-range')).toBe(`bytes */${expected.length}`);

    const head = await download(url, 'alice', {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(expected.length));

    // Over ARTIFACT_READ_MAX_BYTES, resources/read points to the download.
    const tooBig = await server.mcp.error('resources/read', { uri: link.uri }, as('alice'));
    expect(tooBig.code).toBe(-32602);
    expect(tooBig.message).toContain(url);
    expect(tooBig.data).toMatchObject({ size: expected.length, downloadUrl: url });

    const metrics = await (await fetch(new URL('/metrics', server.rt.url))).text();
    expect(metrics).toMatch(/durable_mcp_artifact_written_bytes_total [1-9]/);
    expect(metrics).toMatch(/durable_mcp_artifact_read_bytes_total\{via="download"\} [1-9]/);
    expect(metrics).toMatch(/durable_mcp_artifact_bytes [1-9]/);
  });

  it('returns binary bytes exactly: the download, a range across chunks, and resources/read as a base64 blob', async () => {
    const task = await finished('binary_artifact');
    const link = task.result.content[0];
    expect(link).toMatchObject({ mimeType: 'application/octet-stream', size: RANDOM_BYTES.length });
    expect(link._meta['dev.durable-mcp-tasks/sha256']).toBe(sha256(RANDOM_BYTES));
    const url = link._meta['dev.durable-mcp-tasks/downloadUrl'];
    const whole = Buffer.from(await (await download(url, 'alice')).arrayBuffer());
    expect(whole.equals(RANDOM_BYTES)).toBe(true);
    const start = 2 * MIB - 1_000;
    const part = await download(url, 'alice', { range: `bytes=${start}-${start + 1_499_999}` });
    expect(
      Buffer.from(await part.arrayBuffer()).equals(RANDOM_BYTES.subarray(start, start + 1_500_000)),
    ).toBe(true);
    const read = await server.mcp.result('resources/read', { uri: link.uri }, as('alice'));
    expect(read.contents[0].text).toBeUndefined();
    expect(Buffer.from(read.contents[0].blob, 'base64').equals(RANDOM_BYTES)).toBe(true);
  });

  it("bob cannot read alice's artifact by any path: resources/read, download, HEAD, or guessing names", async () => {
    const task = await finished('export_csv', { megabytes: 1 });
    const link = task.result.content[1];
    const url = link._meta['dev.durable-mcp-tasks/downloadUrl'];
    const unknownUri = `tasks://${task.taskId}/artifacts/no-such.csv`;
    const theirs = await server.mcp.error('resources/read', { uri: link.uri }, as('bob'));
    const unknown = await server.mcp.error('resources/read', { uri: unknownUri }, as('alice'));
    expect({ ...theirs, message: theirs.message.replace(link.uri, '<uri>'), data: undefined, id: 0 }).toEqual(
      {
        ...unknown,
        message: unknown.message.replace(unknownUri, '<uri>'),
        data: undefined,
        id: 0,
      },
    );
    expect(theirs.code).toBe(-32602);
    for (const method of ['GET', 'HEAD']) {
      const res = await download(url, 'bob', {}, method);
      expect(res.status).toBe(404);
      const guessed = await download(url.replace('export.csv', 'tool-result.json'), 'bob', {}, method);
      expect(guessed.status).toBe(404);
    }
    expect((await download(url, 'nobody')).status).toBe(401);
    expect((await fetch(new URL(url))).status).toBe(401);
    // Malformed ids and names are unknown artifacts, not errors.
    expect((await download('/mcp/artifacts/%00/x', 'alice')).status).toBe(404);
    expect((await download(`/mcp/artifacts/${task.taskId}/${'n'.repeat(300)}`, 'alice')).status).toBe(404);
  });

  it('stores a 5 MB result as the artifact tool-result.json; the client gets a link, and the task completes', async () => {
    const task = await finished('big_result');
    expect(task.status).toBe('completed');
    const [line, link] = task.result.content;
    expect(line.type).toBe('text');
    expect(line.text).toContain('MAX_RESULT_BYTES');
    expect(link).toMatchObject({
      type: 'resource_link',
      name: 'tool-result.json',
      mimeType: 'application/json',
      uri: `tasks://${task.taskId}/artifacts/tool-result.json`,
    });
    expect(task.result.structuredContent).toEqual({ rows: 5 });
    const res = await download(link._meta['dev.durable-mcp-tasks/downloadUrl'], 'alice');
    expect(await res.json()).toEqual({
      content: [{ type: 'text', text: BIG_TEXT }],
      structuredContent: { rows: 5 },
    });
  });

  it('fails a task whose step is over MAX_STEP_BYTES, naming the step', async () => {
    const task = await finished('big_step');
    expect(task.status).toBe('failed');
    expect(task.error.message).toMatch(/step "load-rows" returned \d+ bytes, over MAX_STEP_BYTES/);
    expect(task.error.message).toContain('ctx.artifact');
  });

  it('fails a task whose artifact grows past MAX_ARTIFACT_BYTES, naming it; the sweeper deletes what it wrote', async () => {
    const task = await finished('too_big');
    expect(task.status).toBe('failed');
    expect(task.error.message).toBe(
      `artifact "huge.bin" is larger than MAX_ARTIFACT_BYTES (${16 * MIB} bytes): what it wrote is discarded`,
    );
    expect(await artifactRows(task.taskId)).toEqual([{ name: 'huge.bin', state: 'writing', chunks: 16 }]);
    await server.rt.workers!.sweep();
    expect(await artifactRows(task.taskId)).toEqual([]);
  });

  it('an attempt that dies mid-artifact leaves nothing visible; the retry writes it whole, once', async () => {
    const key = 'crash-1';
    const created = await server.mcp.callTool('crash_mid_artifact', { key }, as('alice'));
    const uri = `tasks://${created.taskId}/artifacts/dump.bin`;
    // Three chunks written, the artifact not readable.
    await waitFor(async () => (await artifactRows(created.taskId))[0]?.chunks === 3);
    expect((await server.mcp.error('resources/read', { uri }, as('alice'))).message).toContain('not found');
    bump(`seen:${key}`);
    const task = await waitFor(async () => {
      const t = await server.mcp.result('tasks/get', { taskId: created.taskId }, as('alice'));
      return t.status === 'completed' && t;
    });
    expect(count(`attempt:${key}`)).toBe(2);
    expect(task.result.content[0].size).toBe(5 * MIB);
    // The first attempt's rows stay `writing` until the sweeper deletes them.
    expect(await artifactRows(created.taskId)).toEqual([
      { name: 'dump.bin', state: 'writing', chunks: 3 },
      { name: 'dump.bin', state: 'complete', chunks: 5 },
    ]);
    await server.rt.workers!.sweep();
    expect(await artifactRows(created.taskId)).toEqual([{ name: 'dump.bin', state: 'complete', chunks: 5 }]);
    const bytes = Buffer.from(
      await (
        await download(task.result.content[0]._meta['dev.durable-mcp-tasks/downloadUrl'], 'alice')
      ).arrayBuffer(),
    );
    expect(bytes).toEqual(Buffer.concat([0, 1, 2, 3, 4].map((i) => Buffer.alloc(MIB, i))));
  });

  it('the TTL purge removes a task’s artifacts and their chunks', async () => {
    const task = await finished('short_lived');
    expect(task.status).toBe('completed');
    expect(await artifactRows(task.taskId)).toEqual([{ name: 'short.bin', state: 'complete', chunks: 3 }]);
    const chunksOf = async () =>
      Number(
        (
          await sql<{ n: string }>`select count(*) as n from task_artifact_chunks c join task_artifacts a
            using (artifact_id) where a.task_id = ${task.taskId}`.execute(server.tdb.db)
        ).rows[0]!.n,
      );
    expect(await chunksOf()).toBe(3);
    await waitFor(async () => {
      await server.rt.workers!.sweep();
      const left = await server.tdb.db
        .selectFrom('tasks')
        .select('task_id')
        .where('task_id', '=', task.taskId)
        .executeTakeFirst();
      return left === undefined;
    });
    expect(await artifactRows(task.taskId)).toEqual([]);
    expect(await chunksOf()).toBe(0);
    expect(
      (await download(task.result.content[0]._meta['dev.durable-mcp-tasks/downloadUrl'], 'alice')).status,
    ).toBe(404);
  });

  it('a synchronous call that writes an artifact fails with a clear message', async () => {
    const result = await server.mcp.result(
      'tools/call',
      { name: 'sync_artifact', arguments: {} },
      { ...as('alice'), caps: {} },
    );
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toContain('artifacts need a task');
  });
});
