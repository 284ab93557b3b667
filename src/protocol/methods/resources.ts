import { z } from 'zod';
import type { MethodHandler } from '../context.ts';
import { ProtocolError, ProtocolErrorCode } from '../../core/errors.ts';
import { runWithMrtr } from '../mrtr.ts';
import type { ServerDeps } from '../server-deps.ts';
import { ListParamsSchema } from '../../core/wire.ts';

function noCursor(params: unknown) {
  const { cursor } = ListParamsSchema.parse(params);
  if (cursor !== undefined) throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid cursor');
}

const optional = <T extends object>(o: T) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

export function resourcesList(deps: ServerDeps): MethodHandler {
  return async ({ params }) => {
    noCursor(params);
    return {
      resultType: 'complete',
      resources: deps.resources.resources().map((r) =>
        optional({
          uri: r.uri,
          name: r.name,
          title: r.title,
          description: r.description,
          mimeType: r.mimeType,
        }),
      ),
      ttlMs: deps.listTtlMs,
      cacheScope: 'public',
    };
  };
}

export function resourceTemplatesList(deps: ServerDeps): MethodHandler {
  return async ({ params }) => {
    noCursor(params);
    return {
      resultType: 'complete',
      resourceTemplates: deps.resources.templates().map((t) =>
        optional({
          uriTemplate: t.uriTemplate,
          name: t.name,
          title: t.title,
          description: t.description,
          mimeType: t.mimeType,
        }),
      ),
      ttlMs: deps.listTtlMs,
      cacheScope: 'public',
    };
  };
}

const ReadParamsSchema = z.object({ uri: z.string() }).loose();

export function resourcesRead(deps: ServerDeps): MethodHandler {
  return async (ctx) => {
    const { uri } = ReadParamsSchema.parse(ctx.params);
    const resolved = deps.resources.resolve(uri);
    if (resolved === undefined) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Resource not found: ${uri}`, { uri });
    }
    const outcome = await runWithMrtr(
      deps,
      ctx,
      { request: 'resources/read', arguments: { uri } },
      async (rctx) =>
        resolved.kind === 'resource'
          ? resolved.resource.read(uri, rctx)
          : resolved.template.read(uri, resolved.variables, rctx),
    );
    if (!outcome.done) return outcome.result;
    // Per-principal readers may return private data: never let shared caches keep it.
    return { resultType: 'complete', contents: outcome.value, ttlMs: 0, cacheScope: 'private' };
  };
}
