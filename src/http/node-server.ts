import { Server as HttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ServerType } from '@hono/node-server';

/**
 * How much of a request a closing connection still reads and discards, as nginx's lingering close
 * does: whichever bound comes first ends it.
 */
export interface LingerOptions {
  /** Bytes read once closing began; default 64 MiB, where hono's own drain stops too. */
  maxBytes?: number;
  /** Time in all since closing began; default 30 s (nginx's `lingering_time`). */
  maxMs?: number;
  /** Time without a byte from the client; default 5 s (nginx's `lingering_timeout`). */
  idleMs?: number;
}

const LINGER_DEFAULTS: Readonly<Required<LingerOptions>> = Object.freeze({
  maxBytes: 64 * 1024 * 1024,
  maxMs: 30_000,
  idleMs: 5_000,
});

export interface NodeServerOptions {
  /**
   * Bodies declared longer than this get no `100 Continue`: the app must refuse them from their
   * Content-Length alone (the body limit in `createApp` does), so the client never uploads them.
   */
  maxBodyBytes: number;
  linger?: LingerOptions;
}

/**
 * Makes the server's early answers readable by clients still sending a body (an oversized request's
 * 413): a connection that closes keeps reading and discarding what the client sends, within
 * `linger`'s bounds, instead of resetting it, and a body declared too big after
 * `Expect: 100-continue` is refused before it is sent.
 *
 * Call it once on the server `serve()` returns. HTTP/2 servers are left alone: there, refusing a
 * request resets a stream, not the connection.
 */
export function guardNodeServer(server: ServerType, { maxBodyBytes, linger = {} }: NodeServerOptions): void {
  if (!(server instanceof HttpServer)) return;
  const bounds = { ...LINGER_DEFAULTS, ...linger };
  // The request whose body is still arriving when its connection closes is the socket's latest.
  const latest = new WeakMap<Socket, IncomingMessage>();
  server.on('request', (req: IncomingMessage) => latest.set(req.socket, req));
  server.on('connection', (socket: Socket) => {
    let closing = false;
    // Node calls destroySoon after a `Connection: close` response, and hono's drain after its own
    // bounds: both would destroy a socket with unread bytes, which the kernel answers with a reset
    // that can reach the client before the response it has not read yet.
    socket.destroySoon = () => {
      if (closing) return;
      closing = true;
      lingeringClose(socket, latest.get(socket), bounds);
    };
  });
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    // Without 100 Continue the client waits instead of uploading, and Node closes the connection
    // after the final status, since the client may still send the body.
    if (!(Number(req.headers['content-length']) > maxBodyBytes)) res.writeContinue();
    server.emit('request', req, res);
  });
}

/** Ends the socket once its response is flushed, then reads and discards until a bound or the client's FIN. */
function lingeringClose(
  socket: Socket,
  req: IncomingMessage | undefined,
  bounds: Required<LingerOptions>,
): void {
  // FIN once the response is flushed: the client learns that nothing more will be answered here.
  if (socket.writable) socket.end();
  const destroy = () => socket.destroy();
  const destroyWhenFlushed = () => {
    if (socket.writableFinished) destroy();
    else socket.once('finish', destroy);
  };
  if (!socket.readable) {
    destroyWhenFlushed();
    return;
  }
  // Nobody wants the rest of the body now: let Node's parser drop it rather than hold it for a reader
  // that stopped (hono's body stream pauses the request when its reader gives up at the limit).
  if (req !== undefined && !req.readableEnded) {
    req.removeAllListeners('data');
    req.resume();
  }
  const total = setTimeout(destroy, bounds.maxMs).unref();
  const idle = setTimeout(destroy, bounds.idleMs).unref();
  let read = 0;
  socket.on('data', (chunk: Buffer) => {
    read += chunk.length;
    if (read > bounds.maxBytes) destroy();
    else idle.refresh();
  });
  socket.once('end', destroyWhenFlushed);
  socket.once('close', () => {
    clearTimeout(total);
    clearTimeout(idle);
  });
}
