import { z } from 'zod';
import { ProtocolError, ProtocolErrorCode } from '../../core/errors.ts';
import { defineTool } from '../define.ts';

export const failWith = defineTool({
  name: 'fail_with',
  title: 'Fail on purpose',
  description:
    'Fails in the requested way: "tool" completes with isError, "protocol" fails with a JSON-RPC error, ' +
    '"crash" throws on every attempt until the retries run out. Always a task.',
  inputSchema: z.object({ kind: z.enum(['tool', 'protocol', 'crash']) }),
  taskSupport: 'required',
  handler({ kind }) {
    switch (kind) {
      case 'tool':
        return {
          content: [{ type: 'text', text: 'The tool reported an error, as requested.' }],
          isError: true,
        };
      case 'protocol':
        throw new ProtocolError(ProtocolErrorCode.InternalError, 'Protocol error, as requested');
      case 'crash':
        throw new Error('Crash, as requested');
    }
  },
});
