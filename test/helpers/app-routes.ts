/**
 * Every route of a real app, read from the Hono app itself, and one concrete request for each: so that a
 * test can send all of them somewhere (through nginx, during a database outage), and a route added later
 * is not forgotten. A route with no request here fails the test that sends it; each test keeps its own
 * table of what every route must answer, checked against `servedRoutes` of the app it runs.
 */
import type { Hono } from 'hono';
import { inspectRoutes } from 'hono/dev';
import { randomUUID } from 'node:crypto';
import { bearer, defineTrigger } from '../../src/index.ts';
import { rev2025Headers, mcpHeaders, mcpRequest } from './mcp.ts';

/** A route as the app registers it: `METHOD /pattern`, e.g. `POST /signals/:token`. */
export type Route = string;

/** The app's routes: its handlers, not its middleware, one per method and path, sorted. */
export function servedRoutes(app: Hono<any>): Route[] {
  const routes = inspectRoutes(app)
    .filter((r) => !r.isMiddleware)
    .map((r) => `${r.method} ${r.path}`);
  return [...new Set(routes)].sort();
}

/**
 * What the requests carry. Each one goes as far into its route as it can, to the database where the
 * route has one: authenticated, with ids shaped like real ones, and for the dashboard's forms a CSRF
 * token the dashboard gave the bearer of its token.
 */
export interface RouteContext {
  /** Where the requests go: `http://host:port` of a server, or of a proxy in front of it. */
  origin: string;
  /** An access token for /mcp, the artifact downloads and the task event streams. */
  mcpToken: string;
  /** DASHBOARD_TOKEN, sent as a bearer token (the dashboard's cookie-less sign-in). */
  dashboardToken: string;
  /** The CSRF token of the dashboard's forms for that bearer (from a form of a dashboard page). */
  csrf: string;
  taskId: string;
  artifactName: string;
  /** A well-formed signal token (an unknown one is looked up, and answered 404). */
  signalToken: string;
  /** An `Mcp-Session-Id` (2025-11-25). */
  sessionId: string;
}

/** The bearer token of ROUTE_TRIGGER. */
const ROUTE_TRIGGER_TOKEN = 'route-trigger-token-0123456789';

/**
 * A webhook trigger of the shipped `echo` tool, for the runtimes whose routes are sent: its request
 * (`POST /triggers/route-test`) is let in, and reaches the database.
 */
export const ROUTE_TRIGGER = defineTrigger<{ text: string; id: string }>({
  name: 'route-test',
  tool: 'echo',
  principal: 'route-test',
  verify: bearer(ROUTE_TRIGGER_TOKEN),
  arguments: ({ text }) => ({ text }),
  idempotencyKey: ({ id }) => id,
});

interface RouteRequest {
  path: string;
  init?: RequestInit;
}

const dashboard = (ctx: RouteContext) => ({ authorization: `Bearer ${ctx.dashboardToken}` });
const mcpAuth = (ctx: RouteContext) => ({ authorization: `Bearer ${ctx.mcpToken}` });

/** A dashboard form as the dashboard's own page posts it. */
const form = (ctx: RouteContext, fields: Record<string, string>): RequestInit => ({
  method: 'POST',
  headers: {
    ...dashboard(ctx),
    origin: ctx.origin,
    'content-type': 'application/x-www-form-urlencoded',
  },
  body: new URLSearchParams(fields).toString(),
});

/** A 2025-11-25 request on a session: GET opens its stream, DELETE ends it. */
const onSession = (method: 'GET' | 'DELETE') => (ctx: RouteContext) => ({
  path: '/mcp',
  init: { method, headers: rev2025Headers({ sessionId: ctx.sessionId }, mcpAuth(ctx)) },
});

const artifact = (method: 'GET' | 'HEAD') => (ctx: RouteContext) => ({
  path: `/mcp/artifacts/${ctx.taskId}/${ctx.artifactName}`,
  init: { method, headers: mcpAuth(ctx) },
});

const dashboardTask = (action: string) => (ctx: RouteContext) => ({
  path: `/dashboard/tasks/${ctx.taskId}${action}`,
  init: { headers: dashboard(ctx) },
});

const dashboardTaskForm = (action: string) => (ctx: RouteContext) => ({
  path: `/dashboard/tasks/${ctx.taskId}/${action}`,
  init: form(ctx, { csrf: ctx.csrf }),
});

const REQUESTS: Record<Route, (ctx: RouteContext) => RouteRequest> = {
  'GET /healthz': () => ({ path: '/healthz' }),
  'GET /readyz': () => ({ path: '/readyz' }),
  'GET /metrics': () => ({ path: '/metrics' }),
  'POST /signals/:token': (ctx) => ({
    path: `/signals/${ctx.signalToken}`,
    init: {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ approve: true }),
    },
  }),
  'POST /triggers/:name': () => ({
    path: `/triggers/${ROUTE_TRIGGER.name}`,
    init: {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ROUTE_TRIGGER_TOKEN}` },
      body: JSON.stringify({ text: 'a delivery', id: randomUUID() }),
    },
  }),
  'GET /.well-known/oauth-protected-resource': () => ({ path: '/.well-known/oauth-protected-resource' }),
  'GET /.well-known/oauth-protected-resource/mcp': () => ({
    path: '/.well-known/oauth-protected-resource/mcp',
  }),
  'POST /mcp': (ctx) => {
    const params = { taskId: ctx.taskId };
    return {
      path: '/mcp',
      init: {
        method: 'POST',
        headers: mcpHeaders('tasks/get', params, mcpAuth(ctx)),
        body: JSON.stringify(mcpRequest('tasks/get', params)),
      },
    };
  },
  'GET /mcp': onSession('GET'),
  'DELETE /mcp': onSession('DELETE'),
  'PUT /mcp': (ctx) => ({ path: '/mcp', init: { method: 'PUT', headers: mcpAuth(ctx) } }),
  'PATCH /mcp': (ctx) => ({ path: '/mcp', init: { method: 'PATCH', headers: mcpAuth(ctx) } }),
  'GET /mcp/artifacts/:taskId/:name': artifact('GET'),
  'HEAD /mcp/artifacts/:taskId/:name': artifact('HEAD'),
  'GET /mcp/tasks/:taskId/events': (ctx) => ({
    path: `/mcp/tasks/${ctx.taskId}/events`,
    init: { headers: mcpAuth(ctx) },
  }),
  'GET /dashboard': (ctx) => ({ path: '/dashboard', init: { headers: dashboard(ctx) } }),
  'GET /dashboard/': () => ({ path: '/dashboard/' }),
  'GET /dashboard/style.css': () => ({ path: '/dashboard/style.css' }),
  'GET /dashboard/login': () => ({ path: '/dashboard/login' }),
  'GET /dashboard/schedules': (ctx) => ({ path: '/dashboard/schedules', init: { headers: dashboard(ctx) } }),
  'POST /dashboard/login': (ctx) => ({
    path: '/dashboard/login',
    init: form(ctx, { token: ctx.dashboardToken, operator: 'route test' }),
  }),
  'POST /dashboard/logout': (ctx) => ({ path: '/dashboard/logout', init: form(ctx, { csrf: ctx.csrf }) }),
  'GET /dashboard/tasks/:id': dashboardTask(''),
  'GET /dashboard/tasks/:id/cancel': dashboardTask('/cancel'),
  'GET /dashboard/tasks/:id/resume': dashboardTask('/resume'),
  'GET /dashboard/tasks/:id/fork': dashboardTask('/fork'),
  'GET /dashboard/tasks/:id/events': dashboardTask('/events'),
  'POST /dashboard/tasks/:id/cancel': dashboardTaskForm('cancel'),
  'POST /dashboard/tasks/:id/resume': dashboardTaskForm('resume'),
  'POST /dashboard/tasks/:id/fork': dashboardTaskForm('fork'),
};

/**
 * Sends `route`'s request to `ctx.origin` (redirects are answers, not followed). A route with no request
 * in REQUESTS throws: add one that reaches as far into the route as it can.
 */
export function sendRoute(route: Route, ctx: RouteContext): Promise<Response> {
  const request = REQUESTS[route];
  if (request === undefined) {
    throw new Error(`no request for ${route}: add one to REQUESTS in test/helpers/app-routes.ts`);
  }
  const { path, init } = request(ctx);
  return fetch(new URL(path, ctx.origin), { ...init, redirect: 'manual' });
}

/** The CSRF token of the dashboard's forms, from a page the dashboard serves to the bearer of its token. */
export async function dashboardCsrf(origin: string, dashboardToken: string): Promise<string> {
  const page = await fetch(new URL('/dashboard', origin), {
    headers: { authorization: `Bearer ${dashboardToken}` },
  }).then((r) => r.text());
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1];
  if (csrf === undefined) throw new Error('the dashboard page has no form with a CSRF token');
  return csrf;
}
