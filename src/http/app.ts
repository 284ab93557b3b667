import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Logger } from '../log.ts';
import type { Dispatcher } from '../protocol/dispatch.ts';
import { ProtocolErrorCode } from '../protocol/errors.ts';
import { mcpPost } from './mcp-route.ts';
import { originCheck } from './origin.ts';

export interface AppOptions {
  dispatcher: Dispatcher;
  log: Logger;
  principalOf: (c: Context) => string;
  maxBodyBytes?: number;
  allowedOrigins?: readonly string[];
  keepAliveMs?: number;
  path?: string;
}

/** The Hono app: the MCP endpoint and nothing else. */
export function createApp({
  dispatcher,
  log,
  principalOf,
  maxBodyBytes = 1_000_000,
  allowedOrigins = [],
  keepAliveMs,
  path = '/mcp',
}: AppOptions): Hono {
  const app = new Hono();
  app.use(path, originCheck({ allowedOrigins }));
  app.post(
    path,
    bodyLimit({
      maxSize: maxBodyBytes,
      onError: (c) =>
        c.json(
          {
            jsonrpc: '2.0',
            id: null,
            error: {
              code: ProtocolErrorCode.InvalidRequest,
              message: `Request body exceeds ${maxBodyBytes} bytes`,
            },
          },
          413,
        ),
    }),
    mcpPost({ dispatcher, principalOf, log, ...(keepAliveMs === undefined ? {} : { keepAliveMs }) }),
  );
  app.on(['GET', 'DELETE', 'PUT', 'PATCH'], path, (c) =>
    c.json(
      {
        jsonrpc: '2.0',
        id: null,
        error: { code: ProtocolErrorCode.InvalidRequest, message: 'Method not allowed' },
      },
      405,
      { Allow: 'POST' },
    ),
  );
  app.onError((err, c) => {
    log.error('unhandled error', { error: String(err), stack: err.stack });
    return c.json(
      {
        jsonrpc: '2.0',
        id: null,
        error: { code: ProtocolErrorCode.InternalError, message: 'Internal error' },
      },
      500,
    );
  });
  return app;
}
