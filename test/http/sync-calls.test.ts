import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, describe, expect, it } from 'vitest';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { mcpHeaders, mcpRequest, RawMcp } from '../helpers/mcp.ts';
import { useTestServer } from '../helpers/server-process.ts';
import {
  askName,
  cpuSpin,
  THREAD_TOOLS_MODULE,
  tools as THREAD_TOOLS,
  waitForAbort,
  whereRun,
} from '../helpers/thread-tools.ts';
import { waitFor } from '../helpers/wait.ts';

// The thread tools come from a module the sync-call threads load; the shipped tools here run on the event loop.
const TOOLS = [...SHIPPED_TOOLS, ...THREAD_TOOLS];
const dir = mkdtempSync(path.join(tmpdir(), 'sync-calls-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A fresh pair of files for spins: where each writes that it started, and the one that releases them. */
function spinFiles(label: string) {
  const started = path.join(dir, `${label}-started`);
  const release = path.join(dir, `${label}-release`);
  rmSync(started, { recursive: true, force: true });
  mkdirSync(started);
  return {
    started: (i: number) => path.join(started, String(i)),
    startedCount: () => readdirSync(started).length,
    release,
    releaseAll: () => writeFileSync(release, ''),
  };
}

describe('synchronous calls on sync-call threads', () => {
  const server = useTestServer({
    tools: TOOLS,
    toolsModule: THREAD_TOOLS_MODULE,
    env: { SYNC_CALL_THREADS: '2' },
  });

  it("answers another client's tasks/get and tools/list while CPU-bound synchronous calls hold every thread", async () => {
    const alice = server.mcp;
    const bob = new RawMcp(server.rt.url, {});
    const created = await alice.callTool('analyze_numbers', { count: 10 });
    await alice.waitForTask(created.taskId as string);

    const files = spinFiles('hold');
    let settled = 0;
    const calls = Array.from({ length: 4 }, (_, i) =>
      bob
        .callTool(cpuSpin.name, { startedFile: files.started(i), releaseFile: files.release })
        .finally(() => settled++),
    );
    // Both threads are spinning (never yielding) before the other client asks anything.
    await waitFor(() => files.startedCount() >= 2, { what: () => 'two spins started' });

    expect((await alice.getTask(created.taskId as string)).status).toBe('completed');
    expect((await alice.result('tools/list')).tools).toHaveLength(TOOLS.length);
    // Answered while every synchronous call was still running: none had ended.
    expect(settled).toBe(0);

    files.releaseAll();
    const results = await Promise.all(calls);
    expect(results.map((r) => r.content[0].text)).toEqual(['released', 'released', 'released', 'released']);
  });
});

describe('SYNC_CALL_LOOP_BUDGET_US', () => {
  // A budget no cheap run misses on a loaded machine, and a spin far past it.
  const server = useTestServer({
    tools: TOOLS,
    toolsModule: THREAD_TOOLS_MODULE,
    env: { SYNC_CALL_LOOP_BUDGET_US: '20000' },
  });
  const where = async (spinMs = 0) => {
    const result = await new RawMcp(server.rt.url, {}).callTool(whereRun.name, { spinMs });
    return result.content[0].text as string;
  };

  it('runs a tool on the event loop once its runs on the threads proved cheap, and sends it back for good after one run past the budget', async () => {
    const seen: string[] = [];
    for (let i = 0; i < 50; i++) seen.push(await where());
    expect(new Set(seen)).toEqual(new Set(['thread']));
    expect(await where()).toBe('loop');
    // Far past the budget on the loop (10×: this one run held it), then on the threads whatever its runs take.
    expect(await where(250)).toBe('loop');
    const after: string[] = [];
    for (let i = 0; i < 60; i++) after.push(await where());
    expect(new Set(after)).toEqual(new Set(['thread']));
  });
});

describe('a handler on a sync-call thread', () => {
  const server = useTestServer({ tools: TOOLS, toolsModule: THREAD_TOOLS_MODULE });
  const plain = () => new RawMcp(server.rt.url, {});
  // thread_ask_name is never a task: the client declares forms (and the tasks extension, which it ignores).
  const call = (inputs?: Record<string, unknown>) =>
    server.mcp.request(
      'tools/call',
      { name: askName.name, arguments: {}, ...inputs },
      { meta: { progressToken: 'p' } },
    );
  const answering = (name: string, requestState: string) => ({
    inputResponses: { name: { action: 'accept', content: { name } } },
    requestState,
  });

  it('asks for input over MRTR, then streams its progress and its result', async () => {
    const first = await call();
    expect(first.body.result).toMatchObject({
      resultType: 'input_required',
      inputRequests: { name: { method: 'elicitation/create' } },
    });
    const second = await call(answering('Ada', first.body.result.requestState as string));
    const progress = second.messages.filter((m) => m.method === 'notifications/progress');
    expect(progress.map((m) => m.params)).toEqual([
      { progressToken: 'p', progress: 1, total: 2, message: 'asked' },
      { progressToken: 'p', progress: 2, total: 2, message: 'greeting' },
    ]);
    expect(second.body.result.content).toEqual([{ type: 'text', text: 'hello Ada' }]);
  });

  it("reports the handler's exception as a tool error, as on the event loop", async () => {
    const first = await call();
    const failed = await call(answering('fail', first.body.result.requestState as string));
    expect(failed.body.result).toMatchObject({
      isError: true,
      content: [{ type: 'text', text: 'Tool thread_ask_name failed: no one is called fail' }],
    });
  });

  it("at 2025-11-25, asks the client on the call's stream and streams its progress (sdk 1.x)", async () => {
    const client = new Client({ name: 'sdk1', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    client.setRequestHandler(ElicitRequestSchema, () => ({ action: 'accept', content: { name: 'Ada' } }));
    await client.connect(new StreamableHTTPClientTransport(new URL(server.rt.url)));
    try {
      const progress: number[] = [];
      const greeted = await client.callTool({ name: askName.name, arguments: {} }, undefined, {
        onprogress: (p) => progress.push(p.progress),
      });
      expect(greeted.content).toEqual([{ type: 'text', text: 'hello Ada' }]);
      expect(progress).toEqual([1, 2]);
    } finally {
      await client.close();
    }
  });

  it('aborts the handler when the client closes the stream', async () => {
    const abortedFile = path.join(dir, 'closed-stream-aborted');
    const abort = new AbortController();
    const params = { name: waitForAbort.name, arguments: { abortedFile } };
    const res = await fetch(server.rt.url, {
      method: 'POST',
      signal: abort.signal,
      headers: mcpHeaders('tools/call', params),
      body: JSON.stringify(mcpRequest('tools/call', params, { caps: {}, meta: { progressToken: 1 } })),
    });
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('notifications/progress');
    abort.abort();
    await waitFor(() => existsSync(abortedFile), { what: 'the handler on its thread aborted' });
    expect((await plain().callTool('echo', { text: 'on' })).content[0].text).toBe('on');
  });
});

describe('SYNC_CALL_TIMEOUT_MS', () => {
  const server = useTestServer({
    tools: TOOLS,
    toolsModule: THREAD_TOOLS_MODULE,
    env: { SYNC_CALL_THREADS: '1', SYNC_CALL_TIMEOUT_MS: '300' },
  });
  const plain = () => new RawMcp(server.rt.url, {});

  it('fails a call on a thread that runs past it with -32603 naming the limit, while its handler still spins', async () => {
    const files = spinFiles('timeout');
    const error = await plain().error('tools/call', {
      name: cpuSpin.name,
      arguments: { startedFile: files.started(0), releaseFile: files.release },
    });
    expect(error).toMatchObject({
      status: 200,
      code: -32603,
      data: { limit: 'SYNC_CALL_TIMEOUT_MS', timeoutMs: 300 },
    });
    expect(error.message).toContain('cpu_spin ran past SYNC_CALL_TIMEOUT_MS (300 ms)');
    // The handler never yields: it was still spinning when the answer went out.
    expect(files.startedCount()).toBe(1);

    files.releaseAll();
    // The process serves on, and the thread (free again) runs the next call.
    expect((await plain().callTool('echo', { text: 'still here' })).content[0].text).toBe('still here');
    const next = await plain().callTool(cpuSpin.name, { releaseFile: files.release });
    expect(next.content[0].text).toBe('released');
  });

  it('fails a call on the event loop that runs past it, saying it can run as a task', async () => {
    const error = await plain().error('tools/call', {
      name: 'analyze_numbers',
      arguments: { count: 20, chunkSize: 1, delayMsPerChunk: 1000 },
    });
    expect(error).toMatchObject({ code: -32603, data: { limit: 'SYNC_CALL_TIMEOUT_MS' } });
    expect(error.message).toContain('call it as a task');
    expect((await server.mcp.result('tools/list')).tools).toHaveLength(TOOLS.length);
  });
});
