import { Client as Client2, StreamableHTTPClientTransport as Transport2 } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient, resultFromTaskOutcome } from '@modelcontextprotocol/ext-tasks/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateTaskResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { initializeRequest, rev2025Headers } from '../helpers/mcp.ts';
import { postInSession, useTwoInstances } from '../helpers/rev2025-session.ts';
import { readSse, type SseStream } from '../helpers/sse.ts';
import { waitFor } from '../helpers/wait.ts';

// A 2025-11-25 task waiting for input, with a client that polls tasks/get and calls tasks/result only at
// a terminal status (the Inspector, ext-tasks): its input requests reach the client on the session's GET
// stream, each once, and the answer (a POST to any instance) resumes the task.
const two = useTwoInstances();

/** A raw 2025-11-25 session on `url` that can answer elicitation; returns its id. */
async function openSession(url: string): Promise<string> {
  const res = await fetch(url, {
    method: 'POST',
    headers: rev2025Headers(),
    body: JSON.stringify(
      initializeRequest({
        capabilities: { elicitation: {}, tasks: {} },
        clientInfo: { name: 'raw', version: '1' },
      }),
    ),
  });
  await res.text();
  return res.headers.get('mcp-session-id')!;
}

/** The session's GET stream on `url`. */
async function getStream(url: string, sessionId: string): Promise<SseStream> {
  const abort = new AbortController();
  const res = await fetch(url, {
    headers: { ...rev2025Headers({ sessionId }), accept: 'text/event-stream' },
    signal: abort.signal,
  });
  expect(res.status).toBe(200);
  return readSse(res, abort);
}

/** The next server-to-client request on the stream (status notifications skipped). */
async function nextRequest(stream: SseStream): Promise<Record<string, any>> {
  for (;;) {
    const message = await stream.next(10_000);
    if (message.method !== undefined && message.id !== undefined) return message;
  }
}

/** Starts confirm_action as a 2025-11-25 task in the session; returns its id. */
async function startConfirm(url: string, sessionId: string, action: string): Promise<string> {
  const reply = await postInSession(url, sessionId, {
    id: 1,
    method: 'tools/call',
    params: { name: 'confirm_action', arguments: { action }, task: { ttl: 60_000 } },
  });
  return (reply.body.result as { task: { taskId: string } }).task.taskId;
}

async function statusOf(url: string, sessionId: string, taskId: string): Promise<string> {
  const reply = await postInSession(url, sessionId, { id: 2, method: 'tasks/get', params: { taskId } });
  return (reply.body.result as { status: string }).status;
}

describe('2025-11-25 input requests on the session GET stream', () => {
  it('sdk 1.x polling tasks/get only: the elicitation comes on its GET stream and the task completes', async () => {
    let elicitations = 0;
    const client = new Client(
      { name: 'sdk1-poller', version: '1.0.0' },
      { capabilities: { elicitation: {} } },
    );
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      elicitations++;
      expect(request.params._meta?.['io.modelcontextprotocol/related-task']).toEqual({
        taskId: expect.any(String),
      });
      return { action: 'accept', content: { confirm: true } };
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(two.a.url)));
    try {
      await client.listTools();
      const created = await client.request(
        {
          method: 'tools/call',
          params: { name: 'confirm_action', arguments: { action: 'ship' }, task: { ttl: 60_000 } },
        },
        CreateTaskResultSchema,
      );
      const taskId = created.task.taskId;
      const task = await waitFor(async () => {
        const t = await client.experimental.tasks.getTask(taskId);
        return ['completed', 'failed', 'cancelled'].includes(t.status) ? t : undefined;
      });
      expect(task.status).toBe('completed');
      expect(elicitations).toBe(1);
    } finally {
      await client.close();
    }
  });

  it('ext-tasks on @modelcontextprotocol/client 2.x at 2025-11-25: onInputRequest answers, the call settles', async () => {
    const client = new Client2(
      { name: 'ext-tasks-v1', version: '1.0.0' },
      { capabilities: { elicitation: {} } },
    );
    await client.connect(new Transport2(new URL(two.a.url)));
    const asked: unknown[] = [];
    const session = createTaskSessionFromClient(client, {
      endpointId: two.a.url,
      onInputRequest: async (request) => {
        asked.push(request.params);
        return { action: 'accept', content: { confirm: true } } as never;
      },
    });
    try {
      const execution = await session.callTool('confirm_action', { action: 'release' });
      const { outcome } = await execution.settle();
      const result = resultFromTaskOutcome(outcome) as { content: Array<{ text: string }> };
      expect(result.content[0]!.text).toBe('confirmed: release');
      expect(asked).toHaveLength(1);
    } finally {
      await session.close();
      await client.close();
    }
  });

  it('each request goes out once across two GET streams; the answer, POSTed to the other instance, resumes the task', async () => {
    const sessionId = await openSession(two.a.url);
    const first = await getStream(two.a.url, sessionId);
    const second = await getStream(two.b.url, sessionId);
    try {
      const taskId = await startConfirm(two.a.url, sessionId, 'migrate');
      await waitFor(() => first.messages.length + second.messages.length >= 2 || undefined);
      const requests = () =>
        [...first.messages, ...second.messages].filter((m) => m.method === 'elicitation/create');
      const [request] = await waitFor(() => (requests().length > 0 ? requests() : undefined));
      expect(request!.params._meta['io.modelcontextprotocol/related-task']).toEqual({ taskId });
      await postInSession(two.b.url, sessionId, {
        id: request!.id,
        result: { action: 'accept', content: { confirm: true } },
      });
      await waitFor(async () =>
        (await statusOf(two.a.url, sessionId, taskId)) === 'completed' ? true : undefined,
      );
      expect(requests()).toHaveLength(1);
    } finally {
      first.close();
      second.close();
    }
  });

  it('a task waiting when the GET stream opens is asked on it; a stream that closed unanswered hands it to the next', async () => {
    const sessionId = await openSession(two.b.url);
    const taskId = await startConfirm(two.b.url, sessionId, 'rollback');
    await waitFor(async () =>
      (await statusOf(two.b.url, sessionId, taskId)) === 'input_required' ? true : undefined,
    );
    const lost = await getStream(two.a.url, sessionId);
    const unanswered = await nextRequest(lost);
    expect(unanswered.method).toBe('elicitation/create');
    lost.close();
    await lost.ended;
    const again = await waitFor(async () => {
      const stream = await getStream(two.b.url, sessionId);
      try {
        return await nextRequest(stream).finally(() => stream.close());
      } catch {
        return undefined; // the first stream's claim not released yet
      }
    });
    expect(again.method).toBe('elicitation/create');
    await postInSession(two.a.url, sessionId, {
      id: again.id,
      result: { action: 'accept', content: { confirm: false } },
    });
    await waitFor(async () =>
      (await statusOf(two.b.url, sessionId, taskId)) === 'completed' ? true : undefined,
    );
  });

  it('an error answer leaves the request outstanding: tasks/get still shows it', async () => {
    const sessionId = await openSession(two.a.url);
    const stream = await getStream(two.a.url, sessionId);
    try {
      const taskId = await startConfirm(two.a.url, sessionId, 'drop');
      const request = await nextRequest(stream);
      const refused = await postInSession(two.a.url, sessionId, {
        id: request.id,
        error: { code: -32601, message: 'no' },
      });
      expect(refused.status).toBe(202);
      const reply = await postInSession(two.a.url, sessionId, {
        id: 3,
        method: 'tasks/get',
        params: { taskId },
      });
      expect(reply.body.result).toMatchObject({ status: 'input_required' });
    } finally {
      stream.close();
    }
  });
});
