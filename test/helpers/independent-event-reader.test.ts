/**
 * The draft-only task event reader (independent-event-reader.ts) on its own: it reports the draft's
 * rules broken by a stream made to break them, and reads the independent tasks server (whose
 * tasks/stream was written from the draft too) without a violation: events from seq 0, resumed after
 * a cursor, events_gone past what it keeps, -32602 for a cursor that is not a non-negative integer.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readDraftTaskStream } from './independent-event-reader.ts';
import { useIndependentTasksServer } from './independent-tasks-server.ts';
import { postMcp } from './mcp.ts';
import { waitFor } from './wait.ts';

describe('the draft-only event reader', () => {
  let bad: Server;
  let badUrl: string;
  beforeAll(async () => {
    // Answers every tasks/stream with the same stream, which breaks four of the draft's rules.
    bad = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        const { id, params } = JSON.parse(body) as { id: number; params: { taskId: string } };
        const related = { 'io.modelcontextprotocol/related-task': { taskId: params.taskId } };
        const event = (p: Record<string, unknown>) =>
          `data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/tasks/event', params: p })}\r\n\r\n`;
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(': a comment\n\n');
        res.write(
          event({ seq: 0, taskId: params.taskId, type: 'com.example/a', payload: {}, _meta: related }),
        );
        res.write(
          event({ seq: 2, taskId: params.taskId, type: 'com.example/b', payload: {}, _meta: related }),
        );
        res.write(event({ seq: 3, taskId: params.taskId, type: 'com.example/c', payload: {} }));
        res.write(
          event({ seq: 4, taskId: params.taskId, type: 'com.example/d', payload: [1], _meta: related }),
        );
        res.end(`data: ${JSON.stringify({ jsonrpc: '2.0', id, result: { done: true } })}\n\n`);
      });
    });
    await new Promise<void>((resolve) => bad.listen(0, '127.0.0.1', resolve));
    badUrl = `http://127.0.0.1:${(bad.address() as AddressInfo).port}/mcp`;
  });
  afterAll(async () => {
    await new Promise((resolve) => bad?.close(resolve));
  });

  it('reports the rules a stream breaks', async () => {
    const read = await readDraftTaskStream(badUrl, 't1');
    expect(read.end).toBe('result');
    expect(read.events.map((e) => e.seq)).toEqual([0, 2, 3, 4]);
    expect(read.violations).toEqual([
      'event 2 follows 0: the draft says exactly one more',
      'event 3: _meta lacks io.modelcontextprotocol/related-task for t1',
      'event 4: payload is not a JSON object',
      'the stream ended with a result that is not empty',
    ]);
    const resumed = await readDraftTaskStream(badUrl, 't1', { after: 5 });
    expect(resumed.violations[0]).toBe('event 0 follows 5: the draft says exactly one more');
  });
});

describe('the independent tasks server, read by the draft-only reader', () => {
  const server = useIndependentTasksServer();
  const keepsTwo = useIndependentTasksServer({ keepEvents: 2 });

  const slowCount = async (url: string, steps: number) => {
    const created = await postMcp(url, 'tools/call', { name: 'slow_count', arguments: { steps } });
    const taskId = created.body.result.taskId as string;
    return taskId;
  };

  it('streams from seq 0, resumes after a cursor, and ends with an empty result', async () => {
    const taskId = await slowCount(server.url, 6);
    const first = await readDraftTaskStream(server.url, taskId, { stopAfter: 3 });
    expect(first).toMatchObject({ end: 'stopped', firstSeq: 0, violations: [] });
    const rest = await readDraftTaskStream(server.url, taskId, { after: 2 });
    expect(rest).toMatchObject({ end: 'result', firstSeq: 3, violations: [] });
    const all = [...first.events, ...rest.events];
    expect(all.map((e) => e.seq)).toEqual(all.map((_, i) => i));
    expect(all.at(-1)).toMatchObject({ type: 'org.example.tasks/status', payload: { status: 'completed' } });
    const atEnd = await readDraftTaskStream(server.url, taskId, { after: all.at(-1)!.seq });
    expect(atEnd).toMatchObject({ end: 'result', events: [], violations: [] });
  });

  it('answers events_gone for a cursor older than what it keeps, and -32602 for a bad cursor', async () => {
    const taskId = await slowCount(keepsTwo.url, 4);
    await waitFor(
      async () => (await postMcp(keepsTwo.url, 'tasks/get', { taskId })).body.result.status === 'completed',
    );
    // 4 steps and the completed status: seqs 0–4, of which 3–4 are kept.
    const gone = await readDraftTaskStream(keepsTwo.url, taskId, { after: 1 });
    expect(gone).toMatchObject({
      end: 'error',
      error: { code: -32010, data: { reason: 'events_gone', taskId, earliestSeq: 3 } },
    });
    const kept = await readDraftTaskStream(keepsTwo.url, taskId);
    expect(kept).toMatchObject({ end: 'result', firstSeq: 3, violations: [] });
    expect(kept.events.map((e) => e.seq)).toEqual([3, 4]);
    for (const after of [-1, 1.5]) {
      expect(await readDraftTaskStream(keepsTwo.url, taskId, { after })).toMatchObject({
        end: 'error',
        error: { code: -32602 },
      });
    }
  });
});
