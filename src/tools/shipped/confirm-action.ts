import { z } from 'zod';
import { defineTool } from '../define.ts';

export const confirmAction = defineTool({
  name: 'confirm_action',
  title: 'Confirm an action',
  description:
    'Asks the user to confirm an action (form elicitation), then reports the decision. Always a task.',
  inputSchema: z.object({
    action: z.string().min(1).max(1000).describe('What the user is asked to confirm'),
  }),
  taskSupport: 'required',
  async handler({ action }, ctx) {
    const answer = await ctx.elicit('confirm', {
      message: `Do you confirm this action: ${action}?`,
      requestedSchema: {
        type: 'object',
        properties: { confirm: { type: 'boolean', title: 'Confirm', description: `Confirm: ${action}` } },
        required: ['confirm'],
      },
    });
    const confirmed = answer.action === 'accept' && answer.content?.confirm === true;
    return { content: [{ type: 'text', text: `${confirmed ? 'confirmed' : 'declined'}: ${action}` }] };
  },
});
