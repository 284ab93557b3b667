// Task events are their task's principal's alone: with bearer tokens (AUTH_MODE=bearer), a principal
// asking tasks/stream for another's task gets exactly what tasks/get gives it (as for a task that does not
// exist), while the task runs and after it ended, whatever the cursor; the owner reads every event.
import { describe, expect, it } from 'vitest';
import { hashToken } from '../../src/http/auth/static-tokens.ts';
import {
  expectedScanEvents,
  followTaskEvents,
  streamProblems,
  StreamRefusedError,
  type ScanArgs,
} from '../helpers/event-reader.ts';
import { useTestServer } from '../helpers/server-process.ts';

const PRINCIPALS = ['alice', 'bob'] as const;
type Principal = (typeof PRINCIPALS)[number];
const token = (p: Principal) => `${p}-token`;
const as = (p: Principal) => ({ headers: { authorization: `Bearer ${token(p)}` } });

const server = useTestServer({
  env: {
    AUTH_MODE: 'bearer',
    AUTH_TOKENS: PRINCIPALS.map((p) => `${p}=${hashToken(token(p))}`).join(','),
  },
});

/** A scan_rows task of `owner`: its id and the events it writes. */
async function scanOf(owner: Principal, args: ScanArgs) {
  const { taskId } = await server.mcp.result(
    'tools/call',
    { name: 'scan_rows', arguments: { ...args } },
    as(owner),
  );
  return { taskId: taskId as string, expected: expectedScanEvents(args) };
}

/** The error, without its JSON-RPC id, and its HTTP status. */
const refusal = async (method: string, params: Record<string, unknown>, p: Principal) => {
  const { id: _id, ...error } = await server.mcp.error(method, params, as(p));
  return error;
};

/** `attacker` asks for `taskId`'s events at every kind of cursor: each time what tasks/get answers it. */
async function expectRefusedAsGet(taskId: string, attacker: Principal) {
  const viaGet = await refusal('tasks/get', { taskId }, attacker);
  for (const after of [undefined, 0, 1, 5, 2_147_483_647]) {
    const params = after === undefined ? { taskId } : { taskId, after };
    expect(await refusal('tasks/stream', params, attacker), `after ${after}`).toEqual(viaGet);
  }
  // The resuming reader stops there too: nothing to retry.
  const read = followTaskEvents({ url: server.rt.url, taskId, headers: as(attacker).headers, after: 0 });
  await expect(read).rejects.toBeInstanceOf(StreamRefusedError);
  await expect(read).rejects.toMatchObject({ error: { code: viaGet.code, message: viaGet.message } });
  return viaGet;
}

describe('task events and principals (AUTH_MODE=bearer)', () => {
  it('a principal cannot read another’s task events: the error tasks/get gives, live and finished', async () => {
    const alice = await scanOf('alice', { rows: 3_000, batchSize: 100, batchMs: 30, threshold: 500 });
    const bob = await scanOf('bob', { rows: 500, batchSize: 50, threshold: 300 });
    const aliceReads = followTaskEvents({
      url: server.rt.url,
      taskId: alice.taskId,
      headers: as('alice').headers,
      expected: alice.expected,
    });

    // While Alice's task runs (and Alice streams it), Bob gets nothing of it, and Alice nothing of Bob's.
    const running = await server.mcp.result('tasks/get', { taskId: alice.taskId }, as('alice'));
    expect(running.status).toBe('working');
    const refused = await expectRefusedAsGet(alice.taskId, 'bob');
    await expectRefusedAsGet(bob.taskId, 'alice');
    // What a foreign task answers is what an unknown one does (the id aside): its existence is not told.
    const unknownId = `${alice.taskId.slice(0, -1)}${alice.taskId.endsWith('A') ? 'B' : 'A'}`;
    const unknown = await refusal('tasks/stream', { taskId: unknownId }, 'alice');
    expect({ ...unknown, message: unknown.message.replace(unknownId, alice.taskId) }).toEqual(refused);

    const aliceRead = await aliceReads;
    expect(streamProblems(aliceRead, { expected: alice.expected })).toBeUndefined();
    expect(aliceRead.connections.map((c) => c.end)).toEqual(['complete']);

    // Finished: still refused; each owner reads its own whole.
    await expectRefusedAsGet(alice.taskId, 'bob');
    await expectRefusedAsGet(bob.taskId, 'alice');
    for (const [owner, { taskId, expected }] of [
      ['alice', alice],
      ['bob', bob],
    ] as const) {
      const read = await followTaskEvents({
        url: server.rt.url,
        taskId,
        headers: as(owner).headers,
        expected,
      });
      expect(streamProblems(read, { expected })).toBeUndefined();
    }
  });

  it('without a token, tasks/stream is refused before anything is read', async () => {
    const { taskId } = await scanOf('alice', { rows: 10 });
    const res = await fetch(server.rt.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/stream', params: { taskId } }),
    });
    expect(res.status).toBe(401);
    await res.body?.cancel();
  });
});
