/**
 * The sessions scenario of bench/run.ts: the 2025-11-25 (session) path of our server + one worker, against
 * two floors measured in the same run: the official `@modelcontextprotocol/sdk` 1.x `McpServer` on its
 * stateful transport (bench/sdk1-server.ts), and our own server answering the same request at 2026-07-28
 * (stateless). One session per connection, each connection one request at a time; then CONNECTIONS requests
 * in flight on one session.
 */
import { readSse } from '../test/helpers/sse.ts';
import {
  CONNECTIONS,
  fmt,
  load,
  MCP_HEADERS,
  rows,
  rpcBody,
  startProc,
  type LoadResult,
  type ScratchDb,
} from './lib/harness.ts';
import { mcpUrl, server, worker } from './lib/processes.ts';

const SESSION_VERSION = '2025-11-25';
const SESSIONS = CONNECTIONS;

/** The headers of a request of `sessionId`'s, as an SDK 1.x client sends them. */
const sessionHeaders = (sessionId?: string): Record<string, string> => ({
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': SESSION_VERSION,
  ...(sessionId === undefined ? {} : { 'mcp-session-id': sessionId }),
});

const rpc = (method: string, params: object, id: number | string = 1) =>
  JSON.stringify({ jsonrpc: '2.0', id, method, params });

/** The requests measured: at 2025-11-25 in a session, and the same at 2026-07-28 (none for ping: it has none). */
const REQUESTS = [
  {
    label: 'tools/list',
    method: 'tools/list',
    params: {},
    rev2026: { headers: MCP_HEADERS('tools/list'), body: rpcBody('tools/list', {}) },
  },
  {
    label: 'tools/call echo (synchronous)',
    method: 'tools/call',
    params: { name: 'echo', arguments: { text: 'hello' } },
    rev2026: {
      headers: MCP_HEADERS('tools/call', 'echo'),
      body: rpcBody('tools/call', { name: 'echo', arguments: { text: 'hello' } }, {}),
    },
  },
  { label: 'ping', method: 'ping', params: {}, rev2026: undefined },
] as const;

/** A response's JSON-RPC messages, whether it answered with JSON or with an SSE stream. */
async function messagesOf(res: Response): Promise<{ messages: Array<Record<string, any>>; text: string }> {
  if ((res.headers.get('content-type') ?? '').includes('text/event-stream')) {
    const stream = readSse(res);
    await stream.ended;
    return { messages: stream.messages, text: JSON.stringify(stream.messages) };
  }
  const text = await res.text();
  try {
    return { messages: [JSON.parse(text) as Record<string, any>], text };
  } catch {
    return { messages: [], text };
  }
}

/** POSTs one request and fails, saying what came back, unless it answered 2xx with a `result`. */
async function expectResult(url: string, headers: Record<string, string>, body: string, what: string) {
  const res = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(10_000) });
  const { messages, text } = await messagesOf(res);
  const result = messages.find((m) => 'result' in m);
  if (!res.ok || result === undefined) {
    throw new Error(`${what}: no result (HTTP ${res.status}): ${text.slice(0, 300)}`);
  }
  return { res, result: result.result as Record<string, unknown> };
}

/** initialize, then notifications/initialized: the session's id. */
async function openSession(url: string, what: string): Promise<string> {
  const init = rpc('initialize', {
    protocolVersion: SESSION_VERSION,
    capabilities: {},
    clientInfo: { name: 'bench-sessions', version: '1.0.0' },
  });
  const { res } = await expectResult(url, sessionHeaders(), init, `${what}: initialize`);
  const sessionId = res.headers.get('mcp-session-id');
  if (sessionId === null) throw new Error(`${what}: initialize answered without an Mcp-Session-Id`);
  const initialized = await fetch(url, {
    method: 'POST',
    headers: sessionHeaders(sessionId),
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  await initialized.arrayBuffer();
  if (!initialized.ok) throw new Error(`${what}: notifications/initialized answered ${initialized.status}`);
  return sessionId;
}

interface SessionFigures {
  /** Per request label: one session per connection. */
  perSession: Map<string, LoadResult>;
  /** tools/list, CONNECTIONS requests in flight on one session. */
  oneSession: LoadResult;
}

/** Opens SESSIONS sessions on `url`, checks every request once, then loads each. */
async function measureSessions(url: string, what: string): Promise<SessionFigures> {
  const sessions: string[] = [];
  for (let i = 0; i < SESSIONS; i++) sessions.push(await openSession(url, what));
  const perConnection = sessions.map((id) => ({ 'mcp-session-id': id }));
  for (const r of REQUESTS) {
    await expectResult(url, sessionHeaders(sessions[0]), rpc(r.method, r.params), `${what}: ${r.label}`);
  }
  const perSession = new Map<string, LoadResult>();
  for (const r of REQUESTS) {
    const request = { headers: sessionHeaders(), body: rpc(r.method, r.params) };
    perSession.set(r.label, await load(url, request, { perConnection }));
  }
  // Requests in flight together on one session need ids of their own (a session routes answers by id).
  const oneSession = await load(
    url,
    { headers: sessionHeaders(sessions[0]), body: rpc('tools/list', {}, '[<id>]') },
    { uniqueIds: true },
  );
  return { perSession, oneSession };
}

/** Ours at 2026-07-28 on the same process: the stateless floor (none for ping). */
async function measureStateless(url: string): Promise<Map<string, LoadResult>> {
  const figures = new Map<string, LoadResult>();
  for (const r of REQUESTS) {
    if (r.rev2026 === undefined) continue;
    await expectResult(url, r.rev2026.headers, r.rev2026.body, `ours at 2026-07-28: ${r.label}`);
    figures.set(r.label, await load(url, r.rev2026));
  }
  return figures;
}

async function sdkFloor(): Promise<SessionFigures> {
  const sdk = await startProc(['bench/sdk1-server.ts'], {}, { ready: 'stdout' });
  try {
    return await measureSessions(`http://127.0.0.1:${sdk.port}/mcp`, 'sdk 1.x floor');
  } finally {
    await sdk.stop();
  }
}

// ---- 2025-11-25 sessions vs the SDK 1.x stateful McpServer, and vs ours at 2026-07-28 ----
export async function benchSessions(db: ScratchDb): Promise<void> {
  const srv = await server(db);
  const wrk = await worker(db);
  let ours: SessionFigures;
  let stateless: Map<string, LoadResult>;
  try {
    ours = await measureSessions(mcpUrl(srv), 'ours');
    stateless = await measureStateless(mcpUrl(srv));
  } finally {
    await wrk.stop();
    await srv.stop();
  }
  const sdk = await sdkFloor();
  for (const r of REQUESTS) {
    const o = ours.perSession.get(r.label)!;
    const a = sdk.perSession.get(r.label)!;
    const b = stateless.get(r.label);
    rows.push(
      {
        scenario: `2025-11-25 ${r.label}, ${SESSIONS} sessions`,
        ours: fmt.rps(o),
        floor: `sdk 1.x McpServer, stateful: ${fmt.rps(a)}`,
        ratio: fmt.x(o.rps / a.rps),
        target: '≥ 1.0×, p50 ≤ 2 ms',
      },
      {
        scenario: `the same, floor: ours at 2026-07-28`,
        ours: fmt.rps(o),
        floor: b === undefined ? 'none: 2026-07-28 has no ping' : `ours, stateless: ${fmt.rps(b)}`,
        ratio: b === undefined ? '-' : fmt.x(o.rps / b.rps),
        target: b === undefined ? '' : '≥ 0.8×',
      },
    );
  }
  rows.push({
    scenario: `2025-11-25 tools/list, ${CONNECTIONS} in flight on one session`,
    ours: fmt.rps(ours.oneSession),
    floor: `sdk 1.x McpServer, stateful: ${fmt.rps(sdk.oneSession)}`,
    ratio: fmt.x(ours.oneSession.rps / sdk.oneSession.rps),
    target: '',
  });
}
