import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { missingCapability } from '../../src/index.ts';
import type { InputRequests } from '../../src/index.ts';
import { defineTool, type ToolDefinition } from '../../src/index.ts';
import { form, PNG_1X1, text, WAV_TINY } from './content.ts';

const none = z.object({}).loose();

const simpleText = defineTool({
  name: 'test_simple_text',
  description: 'Returns a simple text response',
  inputSchema: none,
  handler: () => ({ content: [text('This is a simple text response for testing.')] }),
});

const imageContent = defineTool({
  name: 'test_image_content',
  description: 'Returns an image',
  inputSchema: none,
  handler: () => ({ content: [{ type: 'image', data: PNG_1X1, mimeType: 'image/png' }] }),
});

const audioContent = defineTool({
  name: 'test_audio_content',
  description: 'Returns audio',
  inputSchema: none,
  handler: () => ({ content: [{ type: 'audio', data: WAV_TINY, mimeType: 'audio/wav' }] }),
});

const embeddedResource = defineTool({
  name: 'test_embedded_resource',
  description: 'Returns an embedded resource',
  inputSchema: none,
  handler: () => ({
    content: [
      {
        type: 'resource',
        resource: {
          uri: 'test://embedded-resource',
          mimeType: 'text/plain',
          text: 'This is an embedded resource content.',
        },
      },
    ],
  }),
});

const multipleContent = defineTool({
  name: 'test_multiple_content_types',
  description: 'Returns text, an image and a resource',
  inputSchema: none,
  handler: () => ({
    content: [
      text('Multiple content types test:'),
      { type: 'image', data: PNG_1X1, mimeType: 'image/png' },
      {
        type: 'resource',
        resource: {
          uri: 'test://mixed-content-resource',
          mimeType: 'application/json',
          text: JSON.stringify({ test: 'data', value: 123 }),
        },
      },
    ],
  }),
});

const errorHandling = defineTool({
  name: 'test_error_handling',
  description: 'Returns a tool error',
  inputSchema: none,
  handler: () => ({ content: [text('This tool intentionally returns an error for testing')], isError: true }),
});

const withProgress = defineTool({
  name: 'test_tool_with_progress',
  description: 'Reports progress 0, 50, 100',
  inputSchema: none,
  async handler(_args, ctx) {
    for (const p of [0, 50, 100]) {
      await ctx.progress(p, 100, `progress ${p}`);
      if (p < 100) await sleep(50, undefined, { signal: ctx.signal });
    }
    return { content: [text('Progress complete')] };
  },
});

const missingCapabilityTool = defineTool({
  name: 'test_missing_capability',
  description: 'Needs the sampling capability',
  inputSchema: none,
  handler: (_args, ctx) => {
    if (ctx.clientCapabilities.sampling === undefined) throw missingCapability({ sampling: {} });
    return { content: [text('Success')] };
  },
});

const streamingElicitation = defineTool({
  name: 'test_streaming_elicitation',
  description: 'Asks for input through MRTR',
  inputSchema: none,
  async handler(_args, ctx) {
    await ctx.elicit('stream_confirm', form('Continue?', { ok: { type: 'boolean' } }));
    return { content: [text('Streaming complete')] };
  },
});

const loggingTool = defineTool({
  name: 'test_logging_tool',
  description: 'Logs at info level (sent only when the request asks for it)',
  inputSchema: none,
  async handler(_args, ctx) {
    await ctx.log('info', 'Logging evaluated', 'conformance');
    return { content: [text('Logging evaluated')] };
  },
});

const triggerToolChange = defineTool({
  name: 'test_trigger_tool_change',
  description: 'Emits notifications/tools/list_changed',
  inputSchema: none,
  async handler(_args, ctx) {
    await ctx.events.listChanged('tools');
    return { content: [text('Mutation triggered')] };
  },
});

const triggerPromptChange = defineTool({
  name: 'test_trigger_prompt_change',
  description: 'Emits notifications/prompts/list_changed',
  inputSchema: none,
  async handler(_args, ctx) {
    await ctx.events.listChanged('prompts');
    return { content: [text('Mutation triggered')] };
  },
});

const nameOf = (r: { content?: unknown }) => {
  const name = (r.content as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' ? name : '';
};

const irElicitation = defineTool({
  name: 'test_input_required_result_elicitation',
  description: 'MRTR: asks for the user name',
  inputSchema: none,
  async handler(_args, ctx) {
    const answer = await ctx.elicit(
      'user_name',
      form('What is your name?', { name: { type: 'string' } }, ['name']),
    );
    return { content: [text(`Hello, ${nameOf(answer)}!`)] };
  },
});

const samplingRequest = {
  method: 'sampling/createMessage' as const,
  params: {
    messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }],
    maxTokens: 100,
  },
};
const rootsRequest = { method: 'roots/list' as const, params: {} };

const irSampling = defineTool({
  name: 'test_input_required_result_sampling',
  description: 'MRTR: asks for a completion',
  inputSchema: none,
  async handler(_args, ctx) {
    const answer = await ctx.input({ capital_question: samplingRequest });
    const content = answer.capital_question!.content as { text?: string } | undefined;
    return { content: [text(`Sampling said: ${content?.text ?? ''}`)] };
  },
});

const irRoots = defineTool({
  name: 'test_input_required_result_list_roots',
  description: 'MRTR: asks for the client roots',
  inputSchema: none,
  async handler(_args, ctx) {
    const answer = await ctx.input({ client_roots: rootsRequest });
    const roots = (answer.client_roots!.roots as Array<{ uri: string }> | undefined) ?? [];
    return { content: [text(`Roots: ${roots.map((r) => r.uri).join(', ')}`)] };
  },
});

const irRequestState = defineTool({
  name: 'test_input_required_result_request_state',
  description: 'MRTR: round 2 needs the requestState of round 1',
  inputSchema: none,
  async handler(_args, ctx) {
    await ctx.elicit('state_check', form('Confirm?', { ok: { type: 'boolean' } }));
    return { content: [text('state-ok: requestState validated')] };
  },
});

const irMultiple = defineTool({
  name: 'test_input_required_result_multiple_inputs',
  description: 'MRTR: elicitation, sampling and roots at once',
  inputSchema: none,
  async handler(_args, ctx) {
    const answers = await ctx.input({
      user_name: {
        method: 'elicitation/create',
        params: { mode: 'form', ...form('What is your name?', { name: { type: 'string' } }, ['name']) },
      },
      capital_question: samplingRequest,
      client_roots: rootsRequest,
    });
    return {
      content: [
        text(`Hello, ${nameOf(answers.user_name!)}: all ${Object.keys(answers).length} inputs received`),
      ],
    };
  },
});

const irMultiRound = defineTool({
  name: 'test_input_required_result_multi_round',
  description: 'MRTR: two rounds',
  inputSchema: none,
  async handler(_args, ctx) {
    const name = nameOf(
      await ctx.elicit('round1_name', form('Name?', { name: { type: 'string' } }, ['name'])),
    );
    const color = await ctx.elicit(
      'round2_color',
      form(`Favourite color, ${name}?`, { color: { type: 'string' } }, ['color']),
    );
    return { content: [text(`${name} likes ${String((color.content as { color?: unknown }).color)}`)] };
  },
});

const irTampered = defineTool({
  name: 'test_input_required_result_tampered_state',
  description: 'MRTR: a tampered requestState is rejected',
  inputSchema: none,
  async handler(_args, ctx) {
    await ctx.elicit('tamper_check', form('Confirm?', { ok: { type: 'boolean' } }));
    return { content: [text('state accepted')] };
  },
});

const irCapabilities = defineTool({
  name: 'test_input_required_result_capabilities',
  description: 'MRTR: asks only for what the client declared',
  inputSchema: none,
  async handler(_args, ctx) {
    const caps = ctx.clientCapabilities;
    const requests: InputRequests = {};
    if (caps.elicitation !== undefined) {
      requests.user_name = {
        method: 'elicitation/create',
        params: { mode: 'form', ...form('Name?', { name: { type: 'string' } }) },
      };
    } else if (caps.sampling !== undefined) requests.capital_question = samplingRequest;
    else if (caps.roots !== undefined) requests.client_roots = rootsRequest;
    if (Object.keys(requests).length > 0) await ctx.input(requests);
    return { content: [text('capabilities respected')] };
  },
});

const jsonSchema2020 = defineTool({
  name: 'json_schema_2020_12_tool',
  description: 'Tool with JSON Schema 2020-12 features',
  inputSchema: z
    .object({
      name: z.string().optional(),
      address: z.object({ street: z.string().optional(), city: z.string().optional() }).loose().optional(),
      contactMethod: z.enum(['phone', 'email']).optional(),
      phone: z.string().optional(),
      email: z.string().optional(),
    })
    .strict(),
  inputJsonSchema: {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    $defs: {
      address: {
        $anchor: 'addressDef',
        type: 'object',
        properties: { street: { type: 'string' }, city: { type: 'string' } },
      },
    },
    properties: {
      name: { type: 'string' },
      address: { $ref: '#/$defs/address' },
      contactMethod: { type: 'string', enum: ['phone', 'email'] },
      phone: { type: 'string' },
      email: { type: 'string' },
    },
    allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
    if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
    then: { required: ['phone'] },
    else: { required: ['email'] },
    additionalProperties: false,
  },
  handler: (args) => ({ content: [text(`Received: ${JSON.stringify(args)}`)] }),
});

const customHeader = defineTool({
  name: 'test_custom_header',
  description: 'Mirrors its region argument into the Mcp-Param-Region header',
  inputSchema: z.object({ region: z.string().meta({ 'x-mcp-header': 'Region' }) }),
  handler: ({ region }) => ({ content: [text(`Region: ${region}`)] }),
});

/** The conformance suite's "everything" tools, test_simple_text first (the suite calls tools[0] with {}). */
export const EVERYTHING_TOOLS = [
  simpleText,
  imageContent,
  audioContent,
  embeddedResource,
  multipleContent,
  errorHandling,
  withProgress,
  missingCapabilityTool,
  streamingElicitation,
  loggingTool,
  triggerToolChange,
  triggerPromptChange,
  irElicitation,
  irSampling,
  irRoots,
  irRequestState,
  irMultiple,
  irMultiRound,
  irTampered,
  irCapabilities,
  jsonSchema2020,
  customHeader,
] as ToolDefinition[];
