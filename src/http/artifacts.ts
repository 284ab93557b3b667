// GET and HEAD of a task's artifact, `/mcp/artifacts/{taskId}/{name}`, on any instance: the same
// authorization as the MCP endpoint, the task's principal only (anyone else gets the 404 of an unknown
// artifact), a single `Range` for resuming (206, or 416), and the body streamed a chunk at a time with
// the socket's backpressure, so a download holds at most a chunk or two whatever its size.
import { Hono, type Context } from 'hono';
import type { Metrics } from '../core/metrics.ts';
import type { Logger } from '../log.ts';
import type { ArtifactInfo, ArtifactReader } from '../tasks/artifacts.ts';
import type { AuthEnv } from './auth/middleware.ts';

export interface ArtifactRoutesOptions {
  artifacts: ArtifactReader;
  principalOf: (c: Context) => string;
  log: Logger;
  metrics?: Metrics | undefined;
}

/** A byte range to send, inclusive; `unsatisfiable` for 416; undefined for the whole artifact. */
type ByteRange = { start: number; end: number } | 'unsatisfiable' | undefined;

/**
 * RFC 9110 §14: one `bytes=a-b`, `bytes=a-` or `bytes=-n` range. Several ranges, or a header that does
 * not parse, are ignored (the whole artifact is sent), as the RFC allows.
 */
export function parseRange(header: string | undefined, size: number): ByteRange {
  if (header === undefined) return undefined;
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (m === null || (m[1] === '' && m[2] === '')) return undefined;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  if (m[2] !== '' && Number(m[2]) < start) return undefined;
  if (start >= size) return 'unsatisfiable';
  const last = m[2] === '' ? size - 1 : Number(m[2]);
  return { start, end: Math.min(last, size - 1) };
}

const etagOf = (info: ArtifactInfo) => `"${info.sha256}"`;

function headersOf(info: ArtifactInfo): Record<string, string> {
  return {
    'Content-Type': info.mimeType,
    'Accept-Ranges': 'bytes',
    ETag: etagOf(info),
    'Repr-Digest': `sha-256=:${Buffer.from(info.sha256, 'hex').toString('base64')}:`,
    'Last-Modified': info.completedAt.toUTCString(),
    'Content-Disposition': `attachment; filename*=UTF-8''${encodeURIComponent(info.name)}`,
    // The principal's own data: never kept by a shared cache.
    'Cache-Control': 'private, no-cache',
    'X-Content-Type-Options': 'nosniff',
  };
}

export function artifactRoutes({
  artifacts,
  principalOf,
  log,
  metrics,
}: ArtifactRoutesOptions): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.on(['GET', 'HEAD'], '/:taskId/:name', async (c) => {
    const info = await artifacts.find(principalOf(c), c.req.param('taskId'), c.req.param('name'));
    if (info === undefined) return c.text('Not found', 404);
    const headers = headersOf(info);
    // If-Range naming another version of the bytes: the whole artifact, not a piece of the new one.
    const ifRange = c.req.header('if-range');
    const range =
      ifRange === undefined || ifRange === etagOf(info)
        ? parseRange(c.req.header('range'), info.size)
        : undefined;
    if (range === 'unsatisfiable') {
      return c.body(null, 416, { ...headers, 'Content-Range': `bytes */${info.size}` });
    }
    const { start, end } = range ?? { start: 0, end: info.size - 1 };
    const length = end - start + 1;
    const status = range === undefined ? 200 : 206;
    const sent = {
      ...headers,
      'Content-Length': String(length),
      ...(range !== undefined && { 'Content-Range': `bytes ${start}-${end}/${info.size}` }),
    };
    if (c.req.method === 'HEAD' || length === 0) return c.body(null, status, sent);
    return c.body(streamOf(artifacts, info, start, end, { log, metrics }), status, sent);
  });
  return app;
}

/** The bytes as a web stream, read a chunk ahead of the socket and no further (its backpressure). */
function streamOf(
  artifacts: ArtifactReader,
  info: ArtifactInfo,
  start: number,
  end: number,
  { log, metrics }: Pick<ArtifactRoutesOptions, 'log' | 'metrics'>,
): ReadableStream<Uint8Array> {
  const bytes = artifacts.bytes(info, start, end);
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const next = await bytes.next();
          if (next.done === true) return controller.close();
          metrics?.artifactBytesRead.inc({ via: 'download' }, next.value.length);
          controller.enqueue(next.value);
        } catch (err) {
          // Headers are sent: all that is left is to cut the response short (the client sees a short body).
          log.warn('artifact download failed', {
            taskId: info.taskId,
            artifact: info.name,
            error: String(err),
          });
          controller.error(err);
        }
      },
      async cancel() {
        await bytes.return(undefined);
      },
    },
    // One chunk read ahead while the socket takes the last one: two chunks held at most.
    { highWaterMark: 1 },
  );
}
