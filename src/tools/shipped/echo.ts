import { z } from 'zod';
import { defineTool } from '../define.ts';

export const echo = defineTool({
  name: 'echo',
  title: 'Echo',
  description: 'Returns its text, synchronously.',
  inputSchema: z.object({ text: z.string().max(100_000) }),
  taskSupport: 'never',
  handler: ({ text }) => ({ content: [{ type: 'text', text }] }),
});
