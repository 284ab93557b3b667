/**
 * The sessions scenario of bench/run.ts: the 2025-11-25 (session) path of our server + one worker, against
 * two floors measured in the same run: the official `@modelcontextprotocol/sdk` 1.x `McpServer` on its
 * stateful transport (bench/sdk1-server.ts), and our own server answering the same request at 2026-07-28
 * (stateless). One session per connection, each connection one request at a time; then CONNECTIONS requests
 * in flight on one session. All three run at once and take turns in rounds (see ROUNDS).
 */
import { initializeRequest, rev2025Headers, readReply } from '../test/helpers/mcp.ts';
import {
  combineLoads,
  CONNECTIONS,
  DURATION,
  fmt,
  interleaved,
  load,
  MCP_HEADERS,
  ROUNDS,
  rows,
  rpcBody,
  startProc,
  type ScratchDb,
  WARMUP,
} from './lib/harness.ts';
import { mcpUrl, server, worker } from './lib/processes.ts';

const SESSION_VERSION = '2025-11-25';
const SESSIONS = CONNECTIONS;

/** The headers of a request of `sessionId`'s, as an SDK 1.x client sends them (the version header even before a session). */
const sessionHeaders = (sessionId?: string): Record<string, string> =>
  sessionId === undefined
    ? rev2025Headers({}, { 'mcp-protocol-version': SESSION_VERSION })
    : rev2025Headers({ sessionId, protocolVersion: SESSION_VERSION });

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

/** POSTs one request and fails, saying what came back, unless it answered 2xx with a `result`. */
async function expectResult(url: string, headers: Record<string, string>, body: string, what: string) {
  const res = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(10_000) });
  const reply = await readReply(res);
  const result = reply.messages.find((m) => 'result' in m);
  if (!res.ok || result === undefined) {
    throw new Error(`${what}: no result (HTTP ${res.status}): ${reply.text.slice(0, 300)}`);
  }
  return { res, result: result.result as Record<string, unknown> };
}

/** initialize, then notifications/initialized: the session's id. */
async function openSession(url: string, what: string): Promise<string> {
  const init = JSON.stringify(
    initializeRequest({ id: 1, clientInfo: { name: 'bench-sessions', version: '1.0.0' } }),
  );
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

/** Rounds each measurement is split into, ours and the floors taking turns, so a burst of load from
 * elsewhere on this shared machine falls on all of them rather than on one. */
/** A server speaking sessions, with SESSIONS of them open. */
interface SessionTarget {
  url: string;
  sessions: string[];
}

/** Opens SESSIONS sessions on `url` and checks every request once. */
async function sessionTarget(url: string, what: string): Promise<SessionTarget> {
  const sessions: string[] = [];
  for (let i = 0; i < SESSIONS; i++) sessions.push(await openSession(url, what));
  for (const r of REQUESTS) {
    await expectResult(url, sessionHeaders(sessions[0]), rpc(r.method, r.params), `${what}: ${r.label}`);
  }
  return { url, sessions };
}

const ROUND = { duration: DURATION / ROUNDS, warmup: 0 };

/** One request of `r`'s kind at a time on each session. */
const perSession = (t: SessionTarget, r: (typeof REQUESTS)[number], opts = ROUND) =>
  load(
    t.url,
    { headers: sessionHeaders(), body: rpc(r.method, r.params) },
    { ...opts, perConnection: t.sessions.map((id) => ({ 'mcp-session-id': id })) },
  );

/** CONNECTIONS tools/list in flight on one session (each with an id of its own: answers go by id). */
const oneSession = (t: SessionTarget, opts = ROUND) =>
  load(
    t.url,
    { headers: sessionHeaders(t.sessions[0]), body: rpc('tools/list', {}, '[<id>]') },
    { ...opts, uniqueIds: true },
  );

// ---- 2025-11-25 sessions vs the SDK 1.x stateful McpServer, and vs ours at 2026-07-28 ----
export async function benchSessions(db: ScratchDb): Promise<void> {
  const srv = await server(db);
  const wrk = await worker(db);
  const sdk = await startProc(['bench/sdk1-server.ts'], {}, { ready: 'stdout' });
  try {
    const ours = await sessionTarget(mcpUrl(srv), 'ours');
    const floor = await sessionTarget(`http://127.0.0.1:${sdk.port}/mcp`, 'sdk 1.x floor');
    for (const r of REQUESTS) {
      const stateless = r.rev2026;
      if (stateless !== undefined) {
        await expectResult(mcpUrl(srv), stateless.headers, stateless.body, `ours at 2026-07-28: ${r.label}`);
      }
      if (WARMUP > 0) {
        const warm = { duration: WARMUP, warmup: 0 };
        await perSession(ours, r, warm);
        await perSession(floor, r, warm);
        if (stateless !== undefined) await load(mcpUrl(srv), stateless, warm);
      }
      const [o, a, b] = (
        await interleaved([
          () => perSession(ours, r),
          () => perSession(floor, r),
          ...(stateless === undefined ? [] : [() => load(mcpUrl(srv), stateless, ROUND)]),
        ])
      ).map(combineLoads);
      rows.push(
        {
          scenario: `2025-11-25 ${r.label}, ${SESSIONS} sessions`,
          ours: fmt.rps(o!),
          floor: `sdk 1.x McpServer, stateful: ${fmt.rps(a!)}`,
          ratio: fmt.x(o!.rps / a!.rps),
          target: '≥ 1.0×, p50 ≤ 2 ms',
        },
        {
          scenario: `the same, floor: ours at 2026-07-28`,
          ours: fmt.rps(o!),
          floor: b === undefined ? 'none: 2026-07-28 has no ping' : `ours, stateless: ${fmt.rps(b)}`,
          ratio: b === undefined ? '-' : fmt.x(o!.rps / b.rps),
          target: b === undefined ? '' : '≥ 0.8×',
        },
      );
    }
    const [o, a] = (await interleaved([() => oneSession(ours), () => oneSession(floor)])).map(combineLoads);
    rows.push({
      scenario: `2025-11-25 tools/list, ${CONNECTIONS} in flight on one session`,
      ours: fmt.rps(o!),
      floor: `sdk 1.x McpServer, stateful: ${fmt.rps(a!)}`,
      ratio: fmt.x(o!.rps / a!.rps),
      target: '',
    });
  } finally {
    await sdk.stop();
    await wrk.stop();
    await srv.stop();
  }
}
