import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { defineTool, type ToolDefinition } from '../../src/index.ts';
import { form, text } from './content.ts';

// The tools the suite calls at 2025-11-25 (sessions): the same tool API, the server sending the
// elicitation and sampling requests to the client itself on the call's stream.

const none = z.object({}).loose();

const withLogging = defineTool({
  name: 'test_tool_with_logging',
  description: 'Sends three log messages while it runs',
  inputSchema: none,
  async handler(_args, ctx) {
    for (const step of ['started', 'working', 'finishing']) {
      await ctx.log('info', `Tool ${step}`, 'conformance');
      await sleep(50);
    }
    return { content: [text('Logging complete')] };
  },
});

const sampling = defineTool({
  name: 'test_sampling',
  description: 'Asks the client for an LLM completion of the prompt',
  inputSchema: z.object({ prompt: z.string() }),
  async handler({ prompt }, ctx) {
    const answer = await ctx.sample('completion', {
      messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
      maxTokens: 100,
    });
    const content = answer.content as { text?: string } | undefined;
    return { content: [text(`LLM response: ${content?.text ?? JSON.stringify(answer)}`)] };
  },
});

const elicitation = defineTool({
  name: 'test_elicitation',
  description: 'Asks the user for their name and e-mail address',
  inputSchema: z.object({ message: z.string() }),
  async handler({ message }, ctx) {
    const answer = await ctx.elicit(
      'user',
      form(message, { username: { type: 'string' }, email: { type: 'string' } }, ['username', 'email']),
    );
    return { content: [text(`User response: ${JSON.stringify(answer)}`)] };
  },
});

const defaults = defineTool({
  name: 'test_elicitation_sep1034_defaults',
  description: 'Elicits a form whose fields carry defaults (SEP-1034)',
  inputSchema: none,
  async handler(_args, ctx) {
    const answer = await ctx.elicit(
      'defaults',
      form('Please review your details', {
        name: { type: 'string', default: 'John Doe' },
        age: { type: 'integer', default: 30 },
        score: { type: 'number', default: 95.5 },
        status: { type: 'string', enum: ['active', 'inactive', 'pending'], default: 'active' },
        verified: { type: 'boolean', default: true },
      }),
    );
    return { content: [text(`Elicitation result: ${JSON.stringify(answer)}`)] };
  },
});

const enums = defineTool({
  name: 'test_elicitation_sep1330_enums',
  description: 'Elicits every enum form of SEP-1330',
  inputSchema: none,
  async handler(_args, ctx) {
    const answer = await ctx.elicit(
      'enums',
      form('Choose your options', {
        untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
        titledSingle: {
          type: 'string',
          oneOf: [
            { const: 'value1', title: 'First' },
            { const: 'value2', title: 'Second' },
          ],
        },
        legacyEnum: { type: 'string', enum: ['opt1', 'opt2'], enumNames: ['Option One', 'Option Two'] },
        untitledMulti: {
          type: 'array',
          items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
          minItems: 1,
          maxItems: 3,
        },
        titledMulti: {
          type: 'array',
          items: {
            anyOf: [
              { const: 'value1', title: 'First' },
              { const: 'value2', title: 'Second' },
            ],
          },
          minItems: 1,
          maxItems: 3,
        },
      }),
    );
    return { content: [text(`Elicitation result: ${JSON.stringify(answer)}`)] };
  },
});

const reconnection = defineTool({
  name: 'test_reconnection',
  description: 'Closes its response stream early; the client resumes it to get the result',
  inputSchema: none,
  async handler(_args, ctx) {
    ctx.closeStream();
    await sleep(100);
    return { content: [text('Reconnection test completed')] };
  },
});

export const SESSION_TOOLS = [
  withLogging,
  sampling,
  elicitation,
  defaults,
  enums,
  reconnection,
] as ToolDefinition[];
