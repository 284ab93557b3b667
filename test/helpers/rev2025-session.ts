import { afterAll, beforeAll } from 'vitest';
import type { ServerProcess } from '../../src/process/start.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { initializeRequest, rev2025Headers, readReply, type RpcReply } from './mcp.ts';
import { startTestProcess } from './server-process.ts';
import { readSse, type SseStream } from './sse.ts';

/**
 * Opens a 2025-11-25 session (initialize, then notifications/initialized) and returns its id; `headers`
 * go on both (e.g. a bearer token).
 */
export async function openRev2025Session(
  url: string,
  capabilities: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Promise<string> {
  const res = await fetch(url, {
    method: 'POST',
    headers: rev2025Headers({}, headers),
    body: JSON.stringify(initializeRequest({ capabilities })),
  });
  const reply = await readReply(res);
  const sessionId = reply.headers.get('mcp-session-id');
  if (reply.status !== 200 || sessionId === null)
    throw new Error(`initialize failed: HTTP ${reply.status} ${reply.text}`);
  const initialized = await fetch(url, {
    method: 'POST',
    headers: rev2025Headers({ sessionId }, headers),
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  await initialized.arrayBuffer();
  return sessionId;
}

/**
 * A session's GET stream, its SSE ids kept: without `lastEventId` the session's own stream, with it the
 * resumption of the stream that event belongs to.
 */
export async function openSessionGet(
  url: string,
  sessionId: string,
  lastEventId?: string,
  headers: Record<string, string> = {},
): Promise<SseStream & { response: Response }> {
  const abort = new AbortController();
  const response = await fetch(url, {
    method: 'GET',
    signal: abort.signal,
    headers: {
      ...rev2025Headers({ sessionId }),
      accept: 'text/event-stream',
      ...(lastEventId === undefined ? {} : { 'last-event-id': lastEventId }),
      ...headers,
    },
  });
  if (response.status !== 200)
    throw new Error(`GET failed: HTTP ${response.status} ${await response.text()}`);
  return { ...readSse(response, abort), response };
}

/** POSTs one JSON-RPC message of a session (JSON or SSE accepted) and reads the whole reply. */
export async function postInSession(url: string, sessionId: string, message: object): Promise<RpcReply> {
  const res = await fetch(url, {
    method: 'POST',
    headers: rev2025Headers({ sessionId }),
    body: JSON.stringify({ jsonrpc: '2.0', ...message }),
  });
  return readReply(res);
}

export interface TwoInstances {
  /** Serves HTTP and runs the workers. */
  readonly a: ServerProcess & { url: string };
  /** Serves HTTP only: a session's requests and streams on either instance. */
  readonly b: ServerProcess & { url: string };
}

/** A file's two instances on its own database, started before its tests and stopped after them. */
export function useTwoInstances(): TwoInstances {
  let tdb: TestDatabase | undefined;
  let a: (ServerProcess & { url: string }) | undefined;
  let b: (ServerProcess & { url: string }) | undefined;
  beforeAll(async () => {
    tdb = await createTestDatabase();
    a = await startTestProcess({ databaseUrl: tdb.url });
    b = await startTestProcess({ databaseUrl: tdb.url, role: 'server' });
  });
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
    await tdb?.drop();
  });
  return {
    get a() {
      return a!;
    },
    get b() {
      return b!;
    },
  };
}
