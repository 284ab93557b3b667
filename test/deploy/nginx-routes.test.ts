/**
 * The shipped nginx locations (deploy/mcp-locations.conf) against every route the real app serves: a
 * real nginx with that file in front of a real runtime with every optional route on (OAuth metadata, the
 * dashboard, artifacts, signals, the session era). The list of routes is read from the app, so a route
 * added later fails here until it is listed as published or not, and a published one that nginx does not
 * pass (its own 404 page) fails too. A signal delivered to the URL a task hands out wakes the task
 * through nginx; a task's event streams pass unbuffered.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  dashboardCsrf,
  ROUTE_TRIGGER,
  sendRoute,
  servedRoutes,
  type Route,
  type RouteContext,
} from '../helpers/app-routes.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { postMcp } from '../helpers/mcp.ts';
import { startTestIssuer, type TestIssuer } from '../helpers/oauth-issuer.ts';
import { freePort } from '../helpers/ports.ts';
import { startTestProcess } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';
import { startNginx, type Nginx } from '../helpers/system/nginx.ts';
import { emitAwaitSignal, FIRST_EVENT, SECOND_EVENT, signalUrlOf } from '../helpers/signal-event-tool.ts';
import { readSse } from '../helpers/sse.ts';
import { SHIPPED_TOOLS, SHIPPED_TOOLS_MODULE } from '../../src/tools/shipped/index.ts';
import type { ServerProcess } from '../../src/process/start.ts';

/**
 * Whether nginx passes each route to the replicas. Not published: the probes and the scrape that ask one
 * replica about itself (docs/operations.md), which an answer from whichever replica nginx picked would not
 * tell. A new route of the app must be added here.
 */
const PUBLISHED: Record<Route, boolean> = {
  'GET /healthz': true,
  'GET /readyz': false,
  'GET /metrics': false,
  'POST /signals/:token': true,
  'POST /triggers/:name': true,
  'GET /.well-known/oauth-protected-resource': true,
  'GET /.well-known/oauth-protected-resource/mcp': true,
  'POST /mcp': true,
  'GET /mcp': true,
  'DELETE /mcp': true,
  'PUT /mcp': true,
  'PATCH /mcp': true,
  'GET /mcp/artifacts/:taskId/:name': true,
  'HEAD /mcp/artifacts/:taskId/:name': true,
  'GET /mcp/tasks/:taskId/events': true,
  'GET /dashboard': true,
  'GET /dashboard/': true,
  'GET /dashboard/style.css': true,
  'GET /dashboard/login': true,
  'GET /dashboard/schedules': true,
  'POST /dashboard/login': true,
  'POST /dashboard/logout': true,
  'GET /dashboard/tasks/:id': true,
  'GET /dashboard/tasks/:id/cancel': true,
  'GET /dashboard/tasks/:id/resume': true,
  'GET /dashboard/tasks/:id/fork': true,
  'GET /dashboard/tasks/:id/events': true,
  'POST /dashboard/tasks/:id/cancel': true,
  'POST /dashboard/tasks/:id/resume': true,
  'POST /dashboard/tasks/:id/fork': true,
};

const DASHBOARD_TOKEN = 'nginx-routes-dashboard-token';
/** The server's default MAX_SIGNAL_BYTES. */
const MAX_SIGNAL_BYTES = 65_536;
/** The server's default TRIGGER_MAX_BODY_BYTES. */
const TRIGGER_MAX_BODY_BYTES = 1_048_576;

let tdb: TestDatabase;
let issuer: TestIssuer;
let rt: ServerProcess & { url: string };
let nginx: Nginx;
/** The load balancer's origin, as PUBLIC_URL names it. */
let lb: string;
let mcpToken: string;

beforeAll(async () => {
  tdb = await createTestDatabase();
  issuer = await startTestIssuer();
  mcpToken = await issuer.token();
  const nginxPort = await freePort();
  lb = `http://127.0.0.1:${nginxPort}`;
  rt = await startTestProcess({
    databaseUrl: tdb.url,
    env: { ...issuer.env, PUBLIC_URL: lb, DASHBOARD_TOKEN },
    // (As the CLI serves the shipped tools, their synchronous calls on threads.)
    tools: [...SHIPPED_TOOLS, emitAwaitSignal],
    toolsModule: SHIPPED_TOOLS_MODULE,
    triggers: [ROUTE_TRIGGER],
  });
  nginx = await startNginx([Number(new URL(rt.url).port)], nginxPort);
}, 60_000);
afterAll(async () => {
  await nginx?.stop();
  await rt?.stop();
  await issuer?.close();
  await tdb?.drop();
});

/** The test's nginx marks what it proxied with X-Upstream; an answer of its own (the catch-all 404) has none. */
const fromReplica = (res: Response) => res.headers.has('x-upstream');

async function routeContext(origin: string): Promise<RouteContext> {
  return {
    origin,
    mcpToken,
    dashboardToken: DASHBOARD_TOKEN,
    csrf: await dashboardCsrf(origin, DASHBOARD_TOKEN),
    taskId: randomUUID(),
    artifactName: 'export.csv',
    signalToken: 'unknown-signal-token-0123456789',
    sessionId: randomUUID(),
  };
}

const rpc = (method: string, params: Record<string, unknown>) =>
  postMcp(nginx.url, method, params, { headers: { authorization: `Bearer ${mcpToken}` } });

describe('the shipped nginx locations in front of a server', () => {
  it('pass every route the app publishes to a replica, and answer the others with their own 404', async () => {
    expect(Object.keys(PUBLISHED).sort()).toEqual(servedRoutes(rt.app!));
    const ctx = await routeContext(lb);
    const direct = { ...ctx, origin: new URL(rt.url).origin };
    const wrong: string[] = [];
    for (const [route, published] of Object.entries(PUBLISHED)) {
      const res = await sendRoute(route, ctx);
      await res.body?.cancel();
      if (published && !(fromReplica(res) && res.status < 500))
        wrong.push(`${route}: not passed to a replica (HTTP ${res.status})`);
      if (!published && (fromReplica(res) || res.status !== 404))
        wrong.push(`${route}: published, though it is not to be (HTTP ${res.status})`);
      // Each route is there on the replica itself, published or not.
      const onReplica = await sendRoute(route, direct);
      await onReplica.body?.cancel();
      if (onReplica.status >= 500) wrong.push(`${route}: HTTP ${onReplica.status} from the replica`);
    }
    expect(wrong).toEqual([]);
  });

  it("a signal's answers are the server's: an unknown token its JSON 404, an oversized body its JSON 413", async () => {
    const post = (token: string, body: string) =>
      fetch(`${lb}/signals/${token}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
    const unknown = await post('unknown-signal-token-0123456789', '{"approve":true}');
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: 'no such signal' });
    const oversized = await post('unknown-signal-token-0123456789', `"${'x'.repeat(MAX_SIGNAL_BYTES)}"`);
    expect(oversized.status).toBe(413);
    expect(await oversized.json()).toEqual({ error: `the body exceeds ${MAX_SIGNAL_BYTES} bytes` });
  });

  it("a trigger's answers are the server's: a delivery its 202, an oversized body its JSON 413", async () => {
    const post = (body: string) =>
      fetch(`${lb}/triggers/${ROUTE_TRIGGER.name}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: 'Bearer route-trigger-token-0123456789',
        },
        body,
      });
    const delivered = await post(JSON.stringify({ text: 'through nginx', id: randomUUID() }));
    expect(delivered.status).toBe(202);
    expect(fromReplica(delivered)).toBe(true);
    const oversized = await post(
      JSON.stringify({ text: 'x'.repeat(TRIGGER_MAX_BODY_BYTES), id: randomUUID() }),
    );
    expect(oversized.status).toBe(413);
    expect(await oversized.json()).toEqual({ error: `the body exceeds ${TRIGGER_MAX_BODY_BYTES} bytes` });
  });

  it('a signal delivered to the URL its task hands out (PUBLIC_URL, the balancer) wakes the task', async () => {
    const created = await rpc('tools/call', {
      name: 'approved_export',
      arguments: { batches: 1, pauseMs: 0 },
    });
    const taskId = created.body.result?.taskId as string;
    expect(taskId).toBeTypeOf('string');
    const task = async () => (await rpc('tasks/get', { taskId })).body.result as Record<string, any>;
    const url = await waitFor(
      async () => /^Waiting for approval: POST (\S+)$/.exec((await task()).statusMessage)?.[1],
      {
        timeoutMs: 15_000,
        what: 'the task waiting for its approval',
      },
    );
    expect(url.startsWith(`${lb}/signals/`)).toBe(true);

    const delivered = await fetch(url, { method: 'POST', body: JSON.stringify({ approve: true }) });
    expect(delivered.status).toBe(202);
    expect(await delivered.json()).toEqual({ status: 'delivered' });
    const done = await waitFor(
      async () => {
        const t = await task();
        return t.status !== 'working' && t.status !== 'input_required' && t;
      },
      { timeoutMs: 15_000, what: 'the approved task ending' },
    );
    expect(done.status).toBe('completed');
    expect(done.result.content[0].text).toBe('exported 1000 rows in 1 batches');
    const again = await fetch(url, { method: 'POST', body: '{"approve":true}' });
    expect(again.status).toBe(409);
  });

  it("passes a task's event streams (the endpoint's, the dashboard's) unbuffered: each event while the task runs", async () => {
    const created = await rpc('tools/call', { name: 'emit_await_signal', arguments: { note: 'nginx' } });
    const taskId = created.body.result?.taskId as string;
    const open = async (path: string, token: string) => {
      const res = await fetch(`${lb}${path}`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      expect(fromReplica(res)).toBe(true);
      expect(res.headers.get('content-type')).toBe('text/event-stream');
      return readSse(res);
    };
    const streams = [
      await open(`/mcp/tasks/${taskId}/events`, mcpToken),
      await open(`/dashboard/tasks/${taskId}/events`, DASHBOARD_TOKEN),
    ];
    // The first event comes through while the task waits for its signal: nginx held nothing back.
    for (const stream of streams)
      expect(await stream.next(10_000)).toMatchObject({ seq: 1, type: FIRST_EVENT });
    const task = async () => (await rpc('tasks/get', { taskId })).body.result as Record<string, any>;
    const url = await waitFor(async () => signalUrlOf((await task()).statusMessage), {
      timeoutMs: 15_000,
      what: 'the task waiting for its signal',
    });
    expect((await task()).status).toBe('working');
    expect((await fetch(url, { method: 'POST', body: '{}' })).status).toBe(202);
    for (const stream of streams) {
      await stream.ended;
      expect(stream.messages.map((m) => m.type)).toEqual([
        FIRST_EVENT,
        SECOND_EVENT,
        'dev.durable-mcp-tasks/status',
      ]);
    }
  });
});
