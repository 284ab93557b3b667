import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { ProtocolError, ProtocolErrorCode } from '../../src/index.ts';
import { defineTool, type ToolDefinition } from '../../src/index.ts';
import { form, text } from './content.ts';

const greet = defineTool({
  name: 'greet',
  description: 'Greets synchronously',
  inputSchema: z.object({ name: z.string() }).loose(),
  handler: ({ name }) => ({ content: [text(`Hello, ${name}!`)] }),
});

const slowCompute = defineTool({
  name: 'slow_compute',
  description: 'Sleeps for `seconds`, cancellably; a task when the client supports tasks',
  inputSchema: z.object({ seconds: z.number().min(0).max(3600), label: z.string().default('') }).loose(),
  taskSupport: 'optional',
  pollIntervalMs: 200,
  async handler({ seconds, label }, ctx) {
    ctx.status(`computing ${label}`);
    await sleep(seconds * 1000, undefined, { signal: ctx.signal });
    return { content: [text(`Computed ${label} in ${seconds}s`)] };
  },
});

const failingJob = defineTool({
  name: 'failing_job',
  description: 'A task that completes with a tool error',
  inputSchema: z.object({}).loose(),
  taskSupport: 'required',
  handler: () => ({ content: [text('The job failed (tool error)')], isError: true }),
});

const protocolErrorJob = defineTool({
  name: 'protocol_error_job',
  description: 'A task that fails with a JSON-RPC error',
  inputSchema: z.object({}).loose(),
  taskSupport: 'required',
  handler: () => {
    throw new ProtocolError(ProtocolErrorCode.InternalError, 'The job failed with a protocol error');
  },
});

const confirmDelete = defineTool({
  name: 'confirm_delete',
  description: 'A task that asks for confirmation before deleting a file',
  inputSchema: z.object({ filename: z.string() }).loose(),
  taskSupport: 'required',
  pollIntervalMs: 200,
  async handler({ filename }, ctx) {
    const answer = await ctx.elicit(
      'confirm_delete',
      form(`Delete ${filename}?`, { confirm: { type: 'boolean', description: `Delete ${filename}` } }, [
        'confirm',
      ]),
    );
    const confirmed =
      answer.action === 'accept' && (answer.content as { confirm?: unknown }).confirm === true;
    return { content: [text(confirmed ? `Deleted ${filename}` : `Kept ${filename}`)] };
  },
});

const personForm = (message: string) => ({
  method: 'elicitation/create' as const,
  params: { mode: 'form', ...form(message, { name: { type: 'string' }, confirm: { type: 'boolean' } }) },
});

const multiInput = defineTool({
  name: 'multi_input',
  description: 'A task that asks two questions at once',
  inputSchema: z.object({}).loose(),
  taskSupport: 'required',
  pollIntervalMs: 200,
  async handler(_args, ctx) {
    const answers = await ctx.input({
      first_person: personForm('First person?'),
      second_person: personForm('Second person?'),
    });
    const names = Object.values(answers).map((a) => String((a.content as { name?: unknown }).name));
    return { content: [text(`Received ${names.join(' and ')}`)] };
  },
});

const toolWithTask = defineTool({
  name: 'test_tool_with_task',
  description: 'Asks for a name over MRTR, then runs a task with it',
  inputSchema: z.object({}).loose(),
  taskSupport: 'required',
  pollIntervalMs: 200,
  prepare: async (_args, ctx) => {
    const answer = await ctx.elicit(
      'user_name',
      form('What is your name?', { name: { type: 'string' } }, ['name']),
    );
    return { name: String((answer.content as { name?: unknown }).name) };
  },
  handler: (_args, ctx) => ({
    content: [text(`Hello, ${(ctx.prepared as { name: string }).name}! This came from a task.`)],
  }),
});

/** The tools the conformance suite's tasks scenarios call. */
export const TASKS_TOOLS = [
  greet,
  slowCompute,
  failingJob,
  protocolErrorJob,
  confirmDelete,
  multiInput,
  toolWithTask,
] as ToolDefinition[];
