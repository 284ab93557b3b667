import { z } from 'zod';
import { definePrompt, type PromptDefinition } from '../../src/index.ts';
import { defineResource, defineResourceTemplate } from '../../src/index.ts';
import { form, PNG_1X1, text } from './content.ts';

/** test://static-text first: the caching scenario reads resources[0]. */
export const RESOURCES = [
  defineResource({
    uri: 'test://static-text',
    name: 'static-text',
    description: 'A static text resource',
    mimeType: 'text/plain',
    read: (uri) => [
      { uri, mimeType: 'text/plain', text: 'This is the content of the static text resource.' },
    ],
  }),
  defineResource({
    uri: 'test://static-binary',
    name: 'static-binary',
    description: 'A static binary resource (PNG)',
    mimeType: 'image/png',
    read: (uri) => [{ uri, mimeType: 'image/png', blob: PNG_1X1 }],
  }),
];

export const RESOURCE_TEMPLATES = [
  defineResourceTemplate({
    uriTemplate: 'test://template/{id}/data',
    name: 'template-data',
    description: 'Data by id',
    mimeType: 'application/json',
    read: (uri, { id }) => [
      {
        uri,
        mimeType: 'application/json',
        text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
      },
    ],
    complete: { id: (value) => ['123', '456', '789'].filter((v) => v.startsWith(value)) },
  }),
];

export const PROMPTS = [
  definePrompt({
    name: 'test_simple_prompt',
    description: 'A simple prompt',
    get: () => ({ messages: [{ role: 'user', content: text('This is a simple prompt for testing.') }] }),
  }),
  definePrompt({
    name: 'test_prompt_with_arguments',
    description: 'A prompt with two arguments',
    argsSchema: z.object({
      arg1: z.string().describe('First argument'),
      arg2: z.string().describe('Second argument'),
    }),
    get: ({ arg1, arg2 }) => ({
      messages: [{ role: 'user', content: text(`Prompt with arguments: arg1='${arg1}', arg2='${arg2}'`) }],
    }),
    complete: {
      arg1: (value) => ['test-value-1', 'test-value-2', 'other-value'].filter((v) => v.startsWith(value)),
      arg2: (value) => ['alpha', 'beta'].filter((v) => v.startsWith(value)),
    },
  }),
  definePrompt({
    name: 'test_prompt_with_embedded_resource',
    description: 'A prompt embedding a resource',
    argsSchema: z.object({ resourceUri: z.string().describe('The resource to embed') }),
    get: ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: {
              uri: resourceUri,
              mimeType: 'text/plain',
              text: 'Embedded resource content for testing.',
            },
          },
        },
        { role: 'user', content: text('Please process the embedded resource above.') },
      ],
    }),
  }),
  definePrompt({
    name: 'test_prompt_with_image',
    description: 'A prompt with an image',
    get: () => ({
      messages: [
        { role: 'user', content: { type: 'image', data: PNG_1X1, mimeType: 'image/png' } },
        { role: 'user', content: text('Please analyze the image above.') },
      ],
    }),
  }),
  definePrompt({
    name: 'test_input_required_result_prompt',
    description: 'A prompt that needs context from the user (MRTR)',
    async get(_args, ctx) {
      const answer = await ctx.elicit(
        'user_context',
        form('Context?', { context: { type: 'string' } }, ['context']),
      );
      const context = String((answer.content as { context?: unknown }).context);
      return { messages: [{ role: 'user', content: text(`Context given: ${context}`) }] };
    },
  }),
] as PromptDefinition[];
