// The process's HTTP listeners (the MCP endpoint's, METRICS_PORT's): binding one with a clear error, and
// closing one, at once or gracefully.
import { serve, type ServerType } from '@hono/node-server';

/** How long the server keeps an idle keep-alive connection open (see listen). */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/**
 * Binds an HTTP server; a port that cannot be bound (taken, or not allowed) is one clear error naming the
 * setting, not an unhandled 'error' event.
 */
export function listen(
  fetch: (req: Request) => Response | Promise<Response>,
  hostname: string,
  port: number,
  setting: string,
  prepare?: (server: ServerType) => void,
  requestTimeoutMs = 30_000,
): Promise<{ server: ServerType; port: number }> {
  return new Promise((resolve, reject) => {
    const serverOptions = {
      // A request must arrive whole (headers and body) within this; a response may stream for as long as
      // it needs (an SSE stream). Checked every second, so that a slow body is not held on for long after.
      requestTimeout: requestTimeoutMs,
      headersTimeout: Math.min(10_000, requestTimeoutMs),
      connectionsCheckingInterval: 1_000,
      // An idle keep-alive connection stays open longer than the clients and proxies in front keep theirs
      // (nginx's upstream keepalive_timeout is 60 s, load balancers' idle timeouts 60 s): the side that
      // closes an idle connection must be the client's, or a request it sends just then meets a reset.
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    };
    const server = serve({ fetch, hostname, port, serverOptions }, (info) => {
      server.off('error', refused);
      resolve({ server, port: info.port });
    });
    const refused = (err: NodeJS.ErrnoException) => {
      server.close();
      const why =
        err.code === 'EADDRINUSE' ? 'is already in use' : `cannot be bound (${err.code ?? err.message})`;
      reject(new Error(`${hostname}:${port} ${why}: choose another with ${setting}`));
    };
    server.once('error', refused);
    prepare?.(server);
  });
}

export interface ClosableServer {
  close(cb: () => void): void;
  closeIdleConnections(): void;
  closeAllConnections(): void;
}

/** Closes a listener and every connection on it at once (the probes' port). */
export function closeNow(server: ServerType): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    (server as unknown as ClosableServer).closeAllConnections();
  });
}

/**
 * Stops accepting connections, ends subscriptions (they send their graceful result), closes each
 * keep-alive connection as soon as it is idle, and after `graceMs` closes whatever is left.
 */
export async function closeServer(
  server: ClosableServer,
  shutdown: AbortController,
  graceMs: number,
): Promise<void> {
  shutdown.abort();
  await new Promise<void>((resolve) => {
    const idle = setInterval(() => server.closeIdleConnections(), 50);
    const force = setTimeout(() => server.closeAllConnections(), graceMs);
    server.close(() => {
      clearInterval(idle);
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}
