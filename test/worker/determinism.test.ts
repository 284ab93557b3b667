/**
 * The determinism guard: a task whose tool's code changed under it (a deploy while it waited for input)
 * fails with a message naming the recorded step and the one asked for, instead of getting another
 * step's value; a step name repeated in one run is refused; `ctx.patched` lets old tasks replay the old
 * path while new ones take the new one.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, type ToolContext } from '../../src/index.ts';
import { useTestServer } from '../helpers/server-process.ts';

/** Which code is "deployed": the tests switch it while a task waits for input. */
let deployed: 'v1' | 'v2-patched' | 'v3-unguarded' = 'v1';

/** Asks for a confirmation between its steps; what it records depends on the deployed code. */
const migrate = defineTool({
  name: 'migrate',
  description: 'Copies rows in steps, with a confirmation in the middle.',
  inputSchema: z.object({}),
  taskSupport: 'required',
  async handler(_args, ctx) {
    const path: string[] = [await ctx.step('read', () => 'read')];
    if (deployed === 'v1') path.push(await ctx.step('copy', () => 'copy'));
    else if (deployed === 'v3-unguarded')
      path.push(await ctx.step('copy-in-batches', () => 'copy-in-batches'));
    else if (await ctx.patched('batched-copy'))
      path.push(await ctx.step('copy-in-batches', () => 'copy-in-batches'));
    else path.push(await ctx.step('copy', () => 'copy'));
    await confirm(ctx);
    path.push(await ctx.step('verify', () => 'verify'));
    return { content: [{ type: 'text', text: path.join(' > ') }] };
  },
});

async function confirm(ctx: ToolContext): Promise<void> {
  await ctx.elicit('go', {
    message: 'Go on?',
    requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } } },
  });
}

/** Numbers nothing: the same step name on every turn of its loop. */
const loop = defineTool({
  name: 'loop',
  description: 'Reuses one step name in a loop.',
  inputSchema: z.object({}),
  taskSupport: 'required',
  async handler(_args, ctx) {
    let sum = 0;
    for (let i = 0; i < 3; i++) sum += await ctx.step('chunk', () => i);
    return { content: [{ type: 'text', text: String(sum) }] };
  },
});

const server = useTestServer({ tools: [migrate, loop] });

/** Starts `migrate` on the code deployed now and waits until it asks for confirmation. */
async function startAndPark(): Promise<string> {
  const created = await server.mcp.callTool('migrate', {});
  const taskId = created.taskId as string;
  await server.mcp.waitForTask(taskId, (t) => t.status === 'input_required');
  return taskId;
}

async function answerAndFinish(taskId: string): Promise<Record<string, any>> {
  await server.mcp.result('tasks/update', {
    taskId,
    inputResponses: { go: { action: 'accept', content: { ok: true } } },
  });
  return server.mcp.waitForTask(taskId);
}

describe('the determinism guard', () => {
  it('fails a task whose code changed under it, naming both steps', async () => {
    deployed = 'v1';
    const taskId = await startAndPark();
    deployed = 'v3-unguarded';
    const done = await answerAndFinish(taskId);
    expect(done.status).toBe('failed');
    expect(done.error.message).toBe(
      'the handler asked for step "copy-in-batches" as step #2, where this task recorded "copy": ' +
        "the tool's code changed under a running task (guard new code with ctx.patched)",
    );
  });

  it('ctx.patched: a task started on the old code replays it; a new one takes the new path', async () => {
    deployed = 'v1';
    const old = await startAndPark();
    deployed = 'v2-patched';
    const fresh = await startAndPark();
    expect((await answerAndFinish(old)).result.content[0].text).toBe('read > copy > verify');
    expect((await answerAndFinish(fresh)).result.content[0].text).toBe('read > copy-in-batches > verify');
  });

  it('refuses a step name used twice in one run', async () => {
    const created = await server.mcp.callTool('loop', {});
    const done = await server.mcp.waitForTask(created.taskId as string);
    expect(done.status).toBe('failed');
    expect(done.error.message).toContain('step "chunk" was called twice in one run of the handler');
  });
});
