/**
 * Every route of the real app while Postgres is down: a route that needs the database answers 503 with
 * Retry-After (a webhook delivering a signal retries it later) and logs a warning naming the route, never
 * a 500 logged as an unhandled error; a route that does not need it answers as it always does. The list of
 * routes is read from the app, so a route added later fails here until its outage answer is listed.
 */
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { startEmbeddedPostgres, type RunningPostgres } from '../../src/db/embedded.ts';
import { createLogger } from '../../src/log.ts';
import { startProcess, type ServerProcess } from '../../src/process/start.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import {
  dashboardCsrf,
  ROUTE_TRIGGER,
  sendRoute,
  servedRoutes,
  type Route,
  type RouteContext,
} from '../helpers/app-routes.ts';
import { databaseEnv } from '../helpers/database-env.ts';
import { startTestIssuer, type TestIssuer } from '../helpers/oauth-issuer.ts';
import { freePort } from '../helpers/ports.ts';
import { FAST_ENV } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

/**
 * What each route answers while the database is down. `unavailable`: 503 with Retry-After and a warning
 * (`database unavailable`, with the route). `retry-hint`: a JSON-RPC request's answer, HTTP 200 and
 * -32603 saying to retry (`data.retryAfterMs`), and the same warning (with the method). A status: what the
 * route answers without the database, as it does with it. A new route of the app must be added here.
 */
type OutageAnswer = 'unavailable' | 'retry-hint' | { status: number; why: string };
const DURING_OUTAGE: Record<Route, OutageAnswer> = {
  'GET /healthz': { status: 200, why: 'liveness: no database call' },
  'GET /readyz': { status: 503, why: 'not ready (docs/deploy.md)' },
  'GET /metrics': { status: 200, why: "the process's own metrics; the store's gauges are left out" },
  'POST /signals/:token': 'unavailable',
  'POST /triggers/:name': 'unavailable',
  'GET /.well-known/oauth-protected-resource': { status: 200, why: 'configuration' },
  'GET /.well-known/oauth-protected-resource/mcp': { status: 200, why: 'configuration' },
  'POST /mcp': 'retry-hint',
  'GET /mcp': 'unavailable',
  'DELETE /mcp': 'unavailable',
  'PUT /mcp': { status: 405, why: 'no such method' },
  'PATCH /mcp': { status: 405, why: 'no such method' },
  'GET /mcp/artifacts/:taskId/:name': 'unavailable',
  'HEAD /mcp/artifacts/:taskId/:name': 'unavailable',
  'GET /mcp/tasks/:taskId/events': 'unavailable',
  'GET /dashboard': 'unavailable',
  'GET /dashboard/': { status: 301, why: 'a redirect' },
  'GET /dashboard/style.css': { status: 200, why: 'a constant' },
  'GET /dashboard/login': { status: 200, why: 'a constant page' },
  'GET /dashboard/schedules': 'unavailable',
  'POST /dashboard/login': 'unavailable',
  'POST /dashboard/logout': { status: 303, why: 'a bearer has no sign-in to close' },
  'GET /dashboard/tasks/:id': 'unavailable',
  'GET /dashboard/tasks/:id/cancel': 'unavailable',
  'GET /dashboard/tasks/:id/resume': 'unavailable',
  'GET /dashboard/tasks/:id/fork': 'unavailable',
  'GET /dashboard/tasks/:id/events': 'unavailable',
  'POST /dashboard/tasks/:id/cancel': 'unavailable',
  'POST /dashboard/tasks/:id/resume': 'unavailable',
  'POST /dashboard/tasks/:id/fork': 'unavailable',
};

const DASHBOARD_TOKEN = 'db-outage-routes-dashboard-token';

// A Postgres of this test's own, so that it can be stopped.
const dir = mkdtempSync(path.join(tmpdir(), 'mcp-outage-routes-'));
chmodSync(dir, 0o755);
const pgOptions = {
  dataDir: path.join(dir, 'pg'),
  port: await freePort(),
  database: 'outage',
  log: createLogger('warn'),
};
let postgres: RunningPostgres | undefined;
let issuer: TestIssuer;
let rt: ServerProcess;
/** The server's log lines, parsed. */
const logged: Array<{ level: string; msg: string; route?: string; method?: string }> = [];

beforeAll(async () => {
  postgres = await startEmbeddedPostgres(pgOptions);
  issuer = await startTestIssuer();
  const config = loadConfig({
    ...FAST_ENV,
    ...issuer.env,
    ...databaseEnv(postgres.connectionString),
    DASHBOARD_TOKEN,
    // A query waits at most this long for a connection that cannot be made.
    DB_CONNECT_TIMEOUT_MS: '1000',
  });
  const log = createLogger('warn', {}, { destination: { write: (line) => logged.push(JSON.parse(line)) } });
  rt = await startProcess({ config, log, role: 'server', tools: SHIPPED_TOOLS, triggers: [ROUTE_TRIGGER] });
}, 120_000);
afterAll(async () => {
  postgres ??= await startEmbeddedPostgres(pgOptions);
  await rt?.stop();
  await issuer?.close();
  await postgres.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('every route while Postgres is down', () => {
  it('answers 503 with Retry-After where it needs the database, warns once per request, and never 500s', async () => {
    expect(Object.keys(DURING_OUTAGE).sort()).toEqual(servedRoutes(rt.app!));
    const origin = new URL(rt.url!).origin;
    const ctx: RouteContext = {
      origin,
      mcpToken: await issuer.token(),
      dashboardToken: DASHBOARD_TOKEN,
      csrf: await dashboardCsrf(origin, DASHBOARD_TOKEN),
      taskId: randomUUID(),
      artifactName: 'export.csv',
      signalToken: 'well-formed-signal-token-0123456789',
      sessionId: randomUUID(),
    };

    await postgres!.stop();
    postgres = undefined;
    // The readiness check is cached for a second: the outage is seen once /readyz says so.
    await waitFor(async () => (await fetch(`${origin}/readyz`)).status === 503, {
      timeoutMs: 10_000,
      what: '/readyz seeing the outage',
    });
    logged.length = 0;

    const wrong: string[] = [];
    for (const [route, expected] of Object.entries(DURING_OUTAGE)) {
      const res = await sendRoute(route, ctx);
      const body = await res.text();
      const answer = `HTTP ${res.status} ${body.slice(0, 200)}`;
      if (expected === 'unavailable') {
        if (res.status !== 503 || res.headers.get('retry-after') === null)
          wrong.push(`${route}: ${answer}, not 503 with Retry-After`);
        else if (res.headers.get('content-type')?.includes('application/json') !== true)
          wrong.push(`${route}: a 503 without a JSON body`);
      } else if (expected === 'retry-hint') {
        const reply = JSON.parse(body) as { error?: { code?: number; data?: { retryAfterMs?: number } } };
        if (
          res.status !== 200 ||
          reply.error?.code !== -32603 ||
          reply.error.data?.retryAfterMs === undefined
        )
          wrong.push(`${route}: ${answer}, not -32603 with data.retryAfterMs`);
      } else if (res.status !== expected.status) {
        wrong.push(`${route}: ${answer}, not ${expected.status} (${expected.why})`);
      }
    }
    expect(wrong).toEqual([]);

    expect(logged.filter((l) => l.level === 'error')).toEqual([]);
    const warned = logged.filter((l) => l.level === 'warn' && l.msg === 'database unavailable');
    expect(warned.filter((l) => l.route === undefined)).toMatchObject([{ method: 'tasks/get' }]);
    const unavailable = Object.entries(DURING_OUTAGE).filter(([, answer]) => answer === 'unavailable');
    expect(warned.flatMap((l) => (l.route === undefined ? [] : [l.route])).sort()).toEqual(
      unavailable.map(([route]) => route.slice(route.indexOf(' ') + 1)).sort(),
    );
  }, 60_000);
});
