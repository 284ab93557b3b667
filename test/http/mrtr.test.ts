import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/tools/define.ts';
import { countTasks } from '../helpers/db.ts';
import { useTestServer } from '../helpers/server-process.ts';

const nameForm = {
  message: 'Your name?',
  requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
};
const nameOf = (r: { content?: unknown }) => (r.content as { name: string }).name;

const askName = defineTool({
  name: 'ask_name',
  description: 'MRTR: one elicitation, then a greeting',
  inputSchema: z.object({ greeting: z.string().default('Hello') }),
  async handler({ greeting }, ctx) {
    const answer = await ctx.elicit('user_name', nameForm);
    return { content: [{ type: 'text', text: `${greeting}, ${nameOf(answer)}!` }] };
  },
});

const twoRounds = defineTool({
  name: 'two_rounds',
  description: 'MRTR: two rounds, the second depending on the first',
  inputSchema: z.object({ topic: z.string().optional() }),
  async handler(_args, ctx) {
    const first = nameOf(await ctx.elicit('first', nameForm));
    const second = nameOf(await ctx.elicit(`second_for_${first}`, nameForm));
    return { content: [{ type: 'text', text: `${first} then ${second}` }] };
  },
});

const preparedTask = defineTool({
  name: 'prepared_task',
  description: 'MRTR before the task, then a task that uses the answer',
  inputSchema: z.object({}),
  taskSupport: 'required',
  prepare: async (_args, ctx) => ({ name: nameOf(await ctx.elicit('user_name', nameForm)) }),
  handler: (_args, ctx) => ({
    content: [{ type: 'text', text: `task for ${(ctx.prepared as { name: string }).name}` }],
  }),
});

const needsSampling = defineTool({
  name: 'needs_sampling',
  description: 'asks the client for a completion',
  inputSchema: z.object({}),
  async handler(_args, ctx) {
    const r = await ctx.sample('s', {
      messages: [{ role: 'user', content: { type: 'text', text: 'hi' } }],
      maxTokens: 5,
    });
    return { content: [{ type: 'text', text: JSON.stringify(r) }] };
  },
});

const server = useTestServer({
  tools: [askName, twoRounds, preparedTask, needsSampling],
});

const accept = (name: string) => ({ action: 'accept', content: { name } });

describe('multi round-trip requests on the synchronous leg', () => {
  it('answers with an InputRequiredResult, then completes on the retry', async () => {
    const first = await server.mcp.callTool('ask_name', {});
    expect(first).toMatchObject({
      resultType: 'input_required',
      inputRequests: {
        user_name: { method: 'elicitation/create', params: { mode: 'form', message: 'Your name?' } },
      },
    });
    expect(typeof first.requestState).toBe('string');
    const done = await server.mcp.result('tools/call', {
      name: 'ask_name',
      arguments: {},
      inputResponses: { user_name: accept('Ada') },
      requestState: first.requestState,
    });
    expect(done).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'Hello, Ada!' }] });
    // The answer alone is enough when nothing earlier needs carrying.
    const stateless = await server.mcp.result('tools/call', {
      name: 'ask_name',
      arguments: { greeting: 'Hi' },
      inputResponses: { user_name: accept('Bob') },
    });
    expect(stateless.content[0].text).toBe('Hi, Bob!');
  });

  it('carries earlier answers through requestState across rounds', async () => {
    const r1 = await server.mcp.callTool('two_rounds', {});
    expect(Object.keys(r1.inputRequests)).toEqual(['first']);
    const r2 = await server.mcp.result('tools/call', {
      name: 'two_rounds',
      arguments: {},
      inputResponses: { first: accept('Ann') },
      requestState: r1.requestState,
    });
    expect(r2.resultType).toBe('input_required');
    expect(Object.keys(r2.inputRequests)).toEqual(['second_for_Ann']);
    const r3 = await server.mcp.result('tools/call', {
      name: 'two_rounds',
      arguments: {},
      inputResponses: { second_for_Ann: accept('Bo') },
      requestState: r2.requestState,
    });
    expect(r3.content[0].text).toBe('Ann then Bo');
  });

  it('rejects a tampered, foreign or rebound requestState with -32602', async () => {
    const r1 = await server.mcp.callTool('two_rounds', {});
    const state = r1.requestState as string;
    // One byte of the ciphertext changed; a state of the earlier (HMAC-signed) shape with a forged body.
    const [version, iv, sealed, tag] = state.split('.');
    const flipped = Buffer.from(sealed!, 'base64url');
    flipped[0] = flipped[0]! ^ 1;
    const tampered = [version, iv, flipped.toString('base64url'), tag].join('.');
    const forgedBody = Buffer.from(JSON.stringify({ v: 1, r: { first: accept('Mallory') } })).toString(
      'base64url',
    );
    for (const [name, args, requestState] of [
      ['two_rounds', {}, tampered],
      ['two_rounds', {}, `${forgedBody}.${'A'.repeat(43)}`],
      ['two_rounds', {}, `${state}x`],
      ['two_rounds', {}, 'garbage'],
      ['ask_name', {}, state], // bound to another tool
      ['two_rounds', { topic: 'another' }, state], // bound to other arguments
    ] as const) {
      const error = await server.mcp.error('tools/call', { name, arguments: args, requestState });
      expect(error).toMatchObject({ code: -32602, message: 'Invalid requestState' });
    }
  });

  it('carries answers the client cannot read back out of its requestState', async () => {
    const r1 = await server.mcp.callTool('two_rounds', {});
    const r2 = await server.mcp.result('tools/call', {
      name: 'two_rounds',
      arguments: {},
      inputResponses: { first: accept('Zenobia-Secret') },
      requestState: r1.requestState,
    });
    const state = r2.requestState as string;
    const decoded = state
      .split('.')
      .map((part) => Buffer.from(part, 'base64url').toString('latin1'))
      .join(' ');
    expect(decoded).not.toContain('Zenobia');
    expect(state).not.toContain('Zenobia');
  });

  it('resolves MRTR before creating the task, then runs the task with the answer', async () => {
    const before = await countTasks(server.tdb.db);
    const first = await server.mcp.callTool('prepared_task', {});
    expect(first.resultType).toBe('input_required');
    expect(await countTasks(server.tdb.db)).toBe(before);
    const created = await server.mcp.result('tools/call', {
      name: 'prepared_task',
      arguments: {},
      inputResponses: { user_name: accept('Cy') },
      requestState: first.requestState,
    });
    expect(created.resultType).toBe('task');
    const done = await server.mcp.waitForTask(created.taskId);
    expect(done.result.content[0].text).toBe('task for Cy');
  });

  it('refuses input requests the client did not declare support for (-32021)', async () => {
    const error = await server.mcp.error(
      'tools/call',
      { name: 'needs_sampling', arguments: {} },
      { caps: { elicitation: {} } },
    );
    expect(error).toMatchObject({
      status: 400,
      code: -32021,
      data: { requiredCapabilities: { sampling: {} } },
    });
    const noElicitation = await server.mcp.error(
      'tools/call',
      { name: 'ask_name', arguments: {} },
      { caps: {} },
    );
    expect(noElicitation).toMatchObject({
      code: -32021,
      data: { requiredCapabilities: { elicitation: {} } },
    });
  });
});
