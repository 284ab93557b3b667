import { z } from 'zod';
import type { MethodHandler } from '../context.ts';
import { ProtocolError, ProtocolErrorCode } from '../../core/errors.ts';
import type { ServerDeps } from '../server-deps.ts';

const CompleteParamsSchema = z
  .object({
    ref: z.discriminatedUnion('type', [
      z.object({ type: z.literal('ref/prompt'), name: z.string() }).loose(),
      z.object({ type: z.literal('ref/resource'), uri: z.string() }).loose(),
    ]),
    argument: z.object({ name: z.string(), value: z.string() }),
    context: z
      .object({ arguments: z.record(z.string(), z.string()).optional() })
      .loose()
      .optional(),
  })
  .loose();

const MAX_VALUES = 100;

/** completion/complete for prompt arguments and resource template variables. */
export function completionComplete(deps: ServerDeps): MethodHandler {
  return async ({ params }) => {
    const { ref, argument, context } = CompleteParamsSchema.parse(params);
    let completer:
      ((value: string, context: Record<string, string>) => string[] | Promise<string[]>) | undefined;
    if (ref.type === 'ref/prompt') {
      const prompt = deps.prompts.get(ref.name);
      if (prompt === undefined)
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown prompt: ${ref.name}`);
      completer = prompt.complete?.[argument.name];
    } else {
      const template = deps.resources.template(ref.uri);
      if (template === undefined) {
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown resource template: ${ref.uri}`);
      }
      completer = template.complete?.[argument.name];
    }
    const all = completer === undefined ? [] : await completer(argument.value, context?.arguments ?? {});
    return {
      resultType: 'complete',
      completion: { values: all.slice(0, MAX_VALUES), total: all.length, hasMore: all.length > MAX_VALUES },
    };
  };
}
