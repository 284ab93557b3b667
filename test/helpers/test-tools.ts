import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { ProtocolError, ProtocolErrorCode } from '../../src/core/errors.ts';
import { defineTool, type ToolDefinition } from '../../src/tools/define.ts';

/** How often each step body and each handler ran, per task (the workers run in the test's process). */
export const runs = new Map<string, number>();
export const bump = (key: string) => runs.set(key, (runs.get(key) ?? 0) + 1);
export const count = (key: string) => runs.get(key) ?? 0;

const form = (message: string, property: string) => ({
  message,
  requestedSchema: { type: 'object', properties: { [property]: { type: 'string' } }, required: [property] },
});

/** Two elicitations at once: a partial answer must leave only the other one outstanding. */
export const twoQuestions = defineTool({
  name: 'two_questions',
  description: 'Asks two questions at once (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'required',
  async handler(_args, ctx) {
    const answers = await ctx.input({
      first: { method: 'elicitation/create', params: { mode: 'form', ...form('First?', 'a') } },
      second: { method: 'elicitation/create', params: { mode: 'form', ...form('Second?', 'b') } },
    });
    const a = (answers.first!.content as { a: string }).a;
    const b = (answers.second!.content as { b: string }).b;
    return { content: [{ type: 'text', text: `${a}+${b}` }] };
  },
});

/** A step, then input, then another step: the first step must not run again after the resume. */
export const stepper = defineTool({
  name: 'stepper',
  description: 'step, input, step (test tool)',
  inputSchema: z.object({ tag: z.string() }),
  taskSupport: 'required',
  async handler({ tag }, ctx) {
    bump(`${tag}:handler`);
    const a = await ctx.step('a', () => {
      bump(`${tag}:a`);
      return 41;
    });
    const answer = await ctx.elicit('go', form('Go on?', 'word'));
    const b = await ctx.step('b', () => {
      bump(`${tag}:b`);
      return a + 1;
    });
    const word = (answer.content as { word: string }).word;
    return { content: [{ type: 'text', text: `${word}:${b}` }], structuredContent: { a, b } };
  },
});

/** Crashes once after a step; the retry must reuse the step's checkpoint. */
export const crashOnce = defineTool({
  name: 'crash_once',
  description: 'crashes on its first attempt (test tool)',
  inputSchema: z.object({ tag: z.string() }),
  taskSupport: 'required',
  async handler({ tag }, ctx) {
    bump(`${tag}:handler`);
    const value = await ctx.step('before', () => {
      bump(`${tag}:before`);
      return 'checkpointed';
    });
    if (count(`${tag}:handler`) === 1) throw new Error('first attempt crashes');
    return { content: [{ type: 'text', text: value }] };
  },
});

/** Waits on its signal: lets tests see a running attempt stopped by cancel or expiry. */
export const waiter = defineTool({
  name: 'waiter',
  description: 'runs until aborted or until ms pass (test tool)',
  inputSchema: z.object({ tag: z.string(), ms: z.number().int().default(20_000) }),
  taskSupport: 'required',
  async handler({ tag, ms }, ctx) {
    bump(`${tag}:started`);
    try {
      await sleep(ms, undefined, { signal: ctx.signal });
    } catch (err) {
      bump(`${tag}:aborted`);
      throw err;
    }
    return { content: [{ type: 'text', text: 'waited' }] };
  },
});

/** The waiter with a 400 ms TTL: expiry must stop it. */
export const expiringWaiter = defineTool({ ...waiter, name: 'expiring_waiter', ttlMs: 400 });

/** Waits for input with a short TTL. */
export const expiring = defineTool({
  name: 'expiring',
  description: 'asks and waits, TTL 300 ms (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'required',
  ttlMs: 300,
  pollIntervalMs: 50,
  async handler(_args, ctx) {
    await ctx.elicit('never', form('Never answered', 'x'));
    return { content: [{ type: 'text', text: 'answered' }] };
  },
});

/** Two questions one after the other: the second gets its own key, the first is never asked again. */
export const sequentialQuestions = defineTool({
  name: 'sequential_questions',
  description: 'asks q1, then q2 (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'required',
  async handler(_args, ctx) {
    const one = await ctx.elicit('q1', form('One?', 'a'));
    const two = await ctx.elicit('q2', form('Two?', 'b'));
    return {
      content: [
        { type: 'text', text: `${(one.content as { a: string }).a}${(two.content as { b: string }).b}` },
      ],
    };
  },
});

/** Fails with a protocol error Postgres cannot store as it is (a NUL character in its message). */
export const unstorableError = defineTool({
  name: 'unstorable_error',
  description: 'throws a ProtocolError whose message holds a NUL (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'required',
  handler: () => {
    throw new ProtocolError(ProtocolErrorCode.InternalError, 'bad \u0000 message');
  },
});

export const TEST_TOOLS = [
  unstorableError,
  sequentialQuestions,
  twoQuestions,
  stepper,
  crashOnce,
  waiter,
  expiringWaiter,
  expiring,
] as ToolDefinition[];
