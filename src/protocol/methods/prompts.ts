import { z } from 'zod';
import type { MethodHandler } from '../context.ts';
import { describeIssues, ProtocolError, ProtocolErrorCode } from '../../core/errors.ts';
import { runWithMrtr } from '../mrtr.ts';
import type { ServerDeps } from '../server-deps.ts';
import { ListParamsSchema } from '../../core/wire.ts';

export function promptsList(deps: ServerDeps): MethodHandler {
  return async ({ params }) => {
    const { cursor } = ListParamsSchema.parse(params);
    if (cursor !== undefined) throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid cursor');
    return {
      resultType: 'complete',
      prompts: deps.prompts.list(),
      ttlMs: deps.listTtlMs,
      cacheScope: 'public',
    };
  };
}

const GetParamsSchema = z
  .object({ name: z.string(), arguments: z.record(z.string(), z.string()).optional() })
  .loose();

export function promptsGet(deps: ServerDeps): MethodHandler {
  return async (ctx) => {
    const { name, arguments: rawArgs = {} } = GetParamsSchema.parse(ctx.params);
    const prompt = deps.prompts.get(name);
    if (prompt === undefined)
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown prompt: ${name}`);
    const parsed = (prompt.argsSchema ?? z.object({}).loose()).safeParse(rawArgs);
    if (!parsed.success) {
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        `Invalid arguments for prompt ${name}: ${describeIssues(parsed.error)}`,
      );
    }
    const outcome = await runWithMrtr(
      deps,
      ctx,
      { request: `prompts/get:${name}`, arguments: rawArgs },
      async (pctx) => prompt.get(parsed.data, pctx),
    );
    return outcome.done ? { ...outcome.value, resultType: 'complete' } : outcome.result;
  };
}
