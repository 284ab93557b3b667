import { spawn } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { mcpHeaders } from './mcp.ts';

/** Headers of a plausible MCP POST: the body limit must answer before any of them matter. */
export const MCP_POST_HEADERS: Readonly<Record<string, string>> = mcpHeaders('tools/call', { name: 'echo' });

/** A JSON-RPC request padded to `size` bytes. */
export function paddedRequest(size: number): Buffer {
  const head = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","pad":"';
  const tail = '"}}';
  return Buffer.from(head + 'x'.repeat(Math.max(0, size - head.length - tail.length)) + tail);
}

/** What one client saw: a status with its body, or the error that kept it from reading one. */
export type Outcome = { status: number; body: string; uploaded?: number } | { error: string };

/** Runs `n` jobs, `concurrency` at a time, and counts what they saw (`413`, `EPIPE`, `curl exit 55`, ...). */
export async function tally(
  n: number,
  concurrency: number,
  job: () => Promise<Outcome>,
): Promise<{ outcomes: Outcome[]; counts: Record<string, number> }> {
  const outcomes: Outcome[] = [];
  let started = 0;
  const lane = async () => {
    while (started < n) {
      started++;
      outcomes.push(await job());
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  const counts: Record<string, number> = {};
  for (const o of outcomes) {
    const key = 'error' in o ? o.error : String(o.status);
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return { outcomes, counts };
}

/** True when the outcome is the 413 JSON-RPC error the body limit promises for `maxBodyBytes`. */
export function isBodyLimit413(o: Outcome, maxBodyBytes: number): boolean {
  if ('error' in o || o.status !== 413) return false;
  try {
    const body = JSON.parse(o.body) as { jsonrpc?: string; error?: { code?: number; message?: string } };
    return (
      body.jsonrpc === '2.0' &&
      body.error?.code === -32600 &&
      body.error.message === `Request body exceeds ${maxBodyBytes} bytes`
    );
  } catch {
    return false;
  }
}

function errorCode(err: unknown): string {
  const cause = (err as { cause?: { code?: string } }).cause;
  return cause?.code ?? (err as { code?: string }).code ?? String(err);
}

/** One request with Node's fetch; a socket error becomes its code (EPIPE, ECONNRESET, UND_ERR_SOCKET). */
export async function fetchOutcome(url: string, init: RequestInit): Promise<Outcome> {
  try {
    const res = await fetch(url, init);
    return { status: res.status, body: await res.text() };
  } catch (err) {
    return { error: errorCode(err) };
  }
}

/** A chunked body (no Content-Length) of `total` bytes, made of `chunk` repeated; never buffered whole. */
export function chunkedBody(chunk: Uint8Array, total: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      controller.enqueue(chunk);
      sent += chunk.length;
      if (sent >= total) controller.close();
    },
  });
}

/** curl arguments for a POST of the file at `path` with the MCP headers (and any extra arguments). */
export function curlPostArgs(url: string, path: string, extra: readonly string[] = []): string[] {
  return [
    '-X',
    'POST',
    ...Object.entries(MCP_POST_HEADERS).flatMap(([k, v]) => ['-H', `${k}: ${v}`]),
    ...extra,
    '--data-binary',
    `@${path}`,
    url,
  ];
}

/**
 * Runs curl with `args`. A non-zero exit is curl's error (55: failed sending, e.g. EPIPE; 56: failed
 * receiving, e.g. ECONNRESET); otherwise the status, the body and how many body bytes curl uploaded.
 */
export function curlOutcome(args: readonly string[]): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn('curl', ['-sS', '-o', '-', '-w', '\n%{http_code} %{size_upload}', ...args]);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => err.push(d));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) {
        const message = Buffer.concat(err)
          .toString()
          .trim()
          .replace(/^curl: \(\d+\) /, '');
        resolve({ error: `curl exit ${code} (${message.replace(/\d+ bytes/g, 'N bytes')})` });
        return;
      }
      const text = Buffer.concat(out).toString();
      const nl = text.lastIndexOf('\n');
      const [status, uploaded] = text.slice(nl + 1).split(' ');
      resolve({ status: Number(status), body: text.slice(0, nl), uploaded: Number(uploaded) });
    });
  });
}

/**
 * A POST written by hand on a raw socket, declaring `contentLength`: the test decides how much of the
 * body to send and when, so it can play a client that stops, dribbles or floods. Half-open, like a
 * client still uploading: the server's FIN does not end what it sends.
 */
export class RawUpload {
  /** The response once read whole, or the error or close that came first. */
  readonly response: Promise<Outcome>;
  /** Resolves when the socket is closed, whoever closed it: with the error code of a reset, if any. */
  readonly closed: Promise<string | undefined>;
  /** The client's port, which names the connection on the server side (kept: a closed socket forgets it). */
  readonly localPort: number;

  private constructor(readonly socket: Socket) {
    this.localPort = socket.localPort!;
    let error: string | undefined;
    socket.on('error', (err: NodeJS.ErrnoException) => (error ??= err.code ?? String(err)));
    this.closed = new Promise((resolve) => socket.once('close', () => resolve(error)));
    this.response = new Promise((resolve) => {
      let received = Buffer.alloc(0);
      const onData = (chunk: Buffer) => {
        received = Buffer.concat([received, chunk]);
        const parsed = parseResponse(received);
        if (parsed === undefined) return;
        socket.off('data', onData);
        socket.resume(); // keep reading, so the server's FIN is seen
        resolve(parsed);
      };
      socket.on('data', onData);
      socket.once('close', () => resolve({ error: error ?? 'closed before a whole response' }));
    });
  }

  /** Connects to `url` and sends the request head of a POST declaring `contentLength` body bytes. */
  static async open(url: string, contentLength: number): Promise<RawUpload> {
    const { hostname, port, pathname } = new URL(url);
    const socket = connect({ host: hostname, port: Number(port), allowHalfOpen: true });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    const headers = {
      ...MCP_POST_HEADERS,
      host: `${hostname}:${port}`,
      'content-length': String(contentLength),
    };
    socket.write(
      `POST ${pathname} HTTP/1.1\r\n` +
        Object.entries(headers)
          .map(([k, v]) => `${k}: ${v}\r\n`)
          .join('') +
        '\r\n',
    );
    return new RawUpload(socket);
  }

  /** Writes `bytes`; resolves once they are handed to the kernel, or with the error that stopped them. */
  write(bytes: Uint8Array): Promise<Error | undefined> {
    return new Promise((resolve) => {
      if (this.socket.destroyed || !this.socket.writable) resolve(new Error('socket no longer writable'));
      else this.socket.write(bytes, (err) => resolve(err ?? undefined));
    });
  }
}

/** A whole HTTP/1.1 response with a Content-Length in `bytes`, or undefined while more is due. */
function parseResponse(bytes: Buffer): Outcome | undefined {
  const end = bytes.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const head = bytes.subarray(0, end).toString('latin1');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
  if (status === 100) return parseResponse(bytes.subarray(end + 4));
  const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
  if (bytes.length < end + 4 + length) return undefined;
  return { status, body: bytes.subarray(end + 4, end + 4 + length).toString() };
}
