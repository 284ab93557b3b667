// The operator's task dashboard at /dashboard: server-rendered HTML with no script and no CDN, off unless
// DASHBOARD_TOKEN is set. Sign-in with that token sets an HttpOnly, SameSite=Strict cookie: a random value
// per sign-in, kept (hashed) in Postgres so that every instance behind a round-robin load balancer knows
// it, deleted at sign-out. Reads go through the store's admin functions; the cancel button takes the
// tasks/cancel store path. Every POST carries the sign-in's own CSRF token and must come from the
// dashboard's own origin.
import { createHmac } from 'node:crypto';
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import {
  closeDashboardSession,
  dashboardSessionCsrf,
  DASHBOARD_SESSION_MS,
  openDashboardSession,
} from '../tasks/store/dashboard-sessions.ts';
import { bodyLimit } from 'hono/body-limit';
import { bearerToken, sameSecret } from './auth/secret.ts';
import { getCookie, setCookie, deleteCookie } from 'hono/cookie';
import { html, raw } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import type { Logger } from '../log.ts';
import { artifactUri } from '../core/artifacts.ts';
import { formatBytes } from '../core/bytes.ts';
import { TASK_STATUSES } from '../core/wire.ts';
import { TaskNotFoundError } from '../tasks/errors.ts';
import { ACTIVE_STATUSES, TERMINAL_STATUSES } from '../tasks/status.ts';
import {
  adminActivity,
  adminCancelTask,
  adminGetTask,
  adminListTasks,
  type ActivityMinute,
  type AdminTask,
  type AdminTaskFilter,
  type TaskHistory,
} from '../tasks/store/admin.ts';
import { readStoreStats } from '../tasks/store/stats.ts';

export interface DashboardOptions {
  /** The admin credential (DASHBOARD_TOKEN). */
  token: string;
  db: Parameters<typeof adminListTasks>[0];
  /** The registered tools, for the filter. */
  tools: readonly string[];
  bossSchema?: string | undefined;
  log: Logger;
}

const COOKIE = 'durable_mcp_dashboard';
const BASE = '/dashboard';
const AGES: Record<string, number> = {
  '15m': 15 * 60_000,
  '1h': 3_600_000,
  '24h': 86_400_000,
  '7d': 604_800_000,
};

type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

const derive = (token: string, purpose: string) =>
  createHmac('sha256', token).update(purpose).digest('base64url');

/** Whether the request's own scheme is https (directly, or as a proxy in front says). */
function isHttps(c: Context): boolean {
  const proto = c.req.header('x-forwarded-proto')?.split(',')[0]?.trim();
  return (proto ?? new URL(c.req.url).protocol.slice(0, -1)) === 'https';
}

/**
 * Whether a form's Origin is this site: its host against the Host the request came with (a proxy's
 * X-Forwarded-Host first). A proxy that passes the host name without the port (nginx's `$host`) is
 * compared by name. The scheme is not compared: TLS often ends at the proxy.
 */
function sameSite(c: Context, origin: string): boolean {
  let o: URL;
  try {
    o = new URL(origin);
  } catch {
    return false;
  }
  const host =
    c.req.header('x-forwarded-host')?.split(',')[0]?.trim() ??
    c.req.header('host') ??
    new URL(c.req.url).host;
  return host.includes(':') && !host.startsWith('[')
    ? o.host === host
    : o.hostname === host || o.host === host;
}

const SECURITY_HEADERS = {
  'Content-Security-Policy':
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  // Not no-referrer: with it, browsers send `Origin: null` on form posts, which the origin check refuses.
  'Referrer-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

/** What a signed-in request carries: the CSRF token its forms must send back. */
type Env = { Variables: { csrf: string } };

export function dashboardRoutes(opts: DashboardOptions): Hono<Env> {
  // A request with the token itself (Authorization: Bearer) has no ambient credential a form could ride.
  const bearerCsrf = derive(opts.token, 'durable-mcp-tasks dashboard form');
  const app = new Hono<Env>();

  app.use('*', async (c, next) => {
    await next();
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) if (!c.res.headers.has(k)) c.res.headers.set(k, v);
  });
  app.get('/style.css', (c) =>
    c.body(STYLE, 200, { 'content-type': 'text/css; charset=utf-8', 'cache-control': 'max-age=3600' }),
  );
  app.use('*', bodyLimit({ maxSize: 16 * 1024, onError: (c) => c.text('Payload too large', 413) }));
  // Forms post only from the dashboard's own pages (and SameSite=Strict keeps the cookie off other sites').
  app.use('*', async (c: Context, next) => {
    if (c.req.method !== 'POST') return next();
    const origin = c.req.header('origin');
    if (origin !== undefined && !sameSite(c, origin)) return c.text('Forbidden: cross-origin form', 403);
    return next();
  });

  app.get('/login', (c) => c.html(loginPage(), 200));
  app.post('/login', async (c) => {
    const form = await c.req.parseBody();
    if (typeof form.token !== 'string' || !sameSecret(form.token, opts.token)) {
      opts.log.warn('dashboard sign-in refused');
      return c.html(loginPage('That token is not the dashboard token.'), 401);
    }
    const { token } = await openDashboardSession(opts.db);
    setCookie(c, COOKIE, token, {
      path: BASE,
      httpOnly: true,
      sameSite: 'Strict',
      secure: isHttps(c),
      maxAge: DASHBOARD_SESSION_MS / 1000,
    });
    return c.redirect(`${BASE}`, 303);
  });

  const signedIn: MiddlewareHandler<Env> = async (c, next) => {
    if (sameSecret(bearerToken(c.req.header('authorization')), opts.token)) {
      c.set('csrf', bearerCsrf);
      return next();
    }
    const cookie = getCookie(c, COOKIE);
    const csrf = cookie === undefined ? undefined : await dashboardSessionCsrf(opts.db, cookie);
    if (csrf !== undefined) {
      c.set('csrf', csrf);
      return next();
    }
    if (c.req.method === 'GET') return c.redirect(`${BASE}/login`, 303);
    return c.text('Unauthorized', 401);
  };
  const formChecked: MiddlewareHandler<Env> = async (c, next) => {
    const form = await c.req.parseBody();
    if (typeof form.csrf !== 'string' || !sameSecret(form.csrf, c.get('csrf')))
      return c.text('Forbidden: stale form', 403);
    return next();
  };

  app.post('/logout', signedIn, formChecked, async (c) => {
    const cookie = getCookie(c, COOKIE);
    if (cookie !== undefined) await closeDashboardSession(opts.db, cookie);
    deleteCookie(c, COOKIE, { path: BASE });
    return c.redirect(`${BASE}/login`, 303);
  });

  app.get('/', signedIn, async (c) => {
    const filter = filterOf(c);
    const [tasks, stats, activity] = await Promise.all([
      adminListTasks(opts.db, filter),
      readStoreStats(opts.db, opts.bossSchema),
      adminActivity(opts.db, 60),
    ]);
    return c.html(listPage({ tasks, stats, activity, filter, tools: opts.tools, csrf: c.get('csrf') }));
  });
  app.get('/tasks/:id', signedIn, async (c) => {
    const history = await adminGetTask(opts.db, c.req.param('id'));
    const csrf = c.get('csrf');
    if (history === undefined)
      return c.html(layout('Not found', html`<p>No task ${c.req.param('id').slice(0, 64)}.</p>`, csrf), 404);
    return c.html(taskPage(history, csrf));
  });
  app.post('/tasks/:id/cancel', signedIn, formChecked, async (c) => {
    const taskId = c.req.param('id');
    try {
      const outcome = await adminCancelTask(opts.db, taskId);
      opts.log.info('dashboard cancel', {
        taskId,
        status: outcome.status,
        cancelledNow: outcome.cancelledNow,
      });
    } catch (err) {
      if (err instanceof TaskNotFoundError) return c.text('Not found', 404);
      throw err;
    }
    return c.redirect(`${BASE}/tasks/${encodeURIComponent(taskId)}`, 303);
  });
  return app;
}

interface ListQuery {
  status: string[];
  tool: string;
  principal: string;
  age: string;
}

function filterOf(c: Context): AdminTaskFilter & { query: ListQuery } {
  const status = (c.req.queries('status') ?? []).filter((s) =>
    (TASK_STATUSES as readonly string[]).includes(s),
  );
  const tool = c.req.query('tool')?.trim() ?? '';
  const principal = c.req.query('principal')?.trim() ?? '';
  const age = c.req.query('age') ?? '';
  return {
    status,
    tool: tool === '' ? undefined : tool,
    principal: principal === '' ? undefined : principal,
    newerThanMs: AGES[age],
    limit: 200,
    query: { status, tool, principal, age: AGES[age] === undefined ? '' : age },
  };
}

// ---- rendering ----

const iso = (d: Date | null | undefined) =>
  d
    ? d
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d+Z$/, 'Z')
    : '';

function ago(d: Date, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - d.getTime()) / 1000));
  if (s < 90) return `${s} s ago`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min ago`;
  if (s < 36 * 3600) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

const badge = (status: string) => html`<span class="badge ${status}">${status.replace('_', ' ')}</span>`;

function layout(title: string, body: Html, csrf: string, refreshSeconds?: number): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        ${refreshSeconds === undefined ? '' : html`<meta http-equiv="refresh" content="${refreshSeconds}" />`}
        <title>${title} · durable-mcp-tasks</title>
        <link rel="stylesheet" href="${BASE}/style.css" />
      </head>
      <body>
        <header>
          <a class="brand" href="${BASE}">durable-mcp-tasks</a>
          <nav><a href="${BASE}">Tasks</a></nav>
          <form method="post" action="${BASE}/logout">
            <input type="hidden" name="csrf" value="${csrf}" /><button class="link">Sign out</button>
          </form>
        </header>
        <main>${body}</main>
      </body>
    </html>`;
}

function loginPage(error?: string): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <title>Sign in · durable-mcp-tasks</title>
        <link rel="stylesheet" href="${BASE}/style.css" />
      </head>
      <body class="login">
        <main>
          <h1>durable-mcp-tasks</h1>
          <form method="post" action="${BASE}/login">
            <label
              >Dashboard token
              <input type="password" name="token" autocomplete="current-password" autofocus required
            /></label>
            ${error === undefined ? '' : html`<p class="error" role="alert">${error}</p>`}
            <button>Sign in</button>
          </form>
        </main>
      </body>
    </html>`;
}

interface ListPage {
  tasks: AdminTask[];
  stats: Awaited<ReturnType<typeof readStoreStats>>;
  activity: ActivityMinute[];
  filter: { query: ListQuery };
  tools: readonly string[];
  csrf: string;
}

function listPage({ tasks, stats, activity, filter, tools, csrf }: ListPage): Html {
  const q = filter.query;
  const cards = [...ACTIVE_STATUSES, ...TERMINAL_STATUSES].map(
    (s) =>
      html`<a class="card ${s}" href="${BASE}?status=${s}"
        ><span class="n">${stats.tasksByStatus[s] ?? 0}</span><span>${s.replace('_', ' ')}</span></a
      >`,
  );
  const body = html` <section class="cards">
      ${cards}
      <div class="card queue"><span class="n">${stats.runsWaiting}</span><span>runs waiting</span></div>
      <div class="card queue">
        <span class="n">${stats.oldestWaitingRunSeconds.toFixed(1)} s</span><span>oldest waiting run</span>
      </div>
      <div class="card queue">
        <span class="n">${stats.expiredNotSwept}</span><span>expired, not swept</span>
      </div>
    </section>
    <section class="charts">
      <figure>
        <figcaption>
          Throughput, last 60 min: <span class="k created">created</span> and
          <span class="k finished">finished</span> per minute
        </figcaption>
        ${throughputChart(activity)}
      </figure>
      <figure>
        <figcaption>Backlog: tasks working or waiting for input, end of each minute</figcaption>
        ${backlogChart(activity)}
      </figure>
    </section>
    <form class="filters" method="get" action="${BASE}">
      <fieldset>
        <legend>Status</legend>
        ${TASK_STATUSES.map(
          (s) =>
            html`<label
              ><input type="checkbox" name="status" value="${s}" ${q.status.includes(s) ? 'checked' : ''} />
              ${s.replace('_', ' ')}</label
            >`,
        )}
      </fieldset>
      <label
        >Tool
        <select name="tool">
          <option value="">any</option>
          ${tools.map((t) => html`<option value="${t}" ${q.tool === t ? 'selected' : ''}>${t}</option>`)}
        </select></label
      >
      <label>Principal <input name="principal" value="${q.principal}" placeholder="any" /></label>
      <label
        >Created
        <select name="age">
          <option value="">any time</option>
          ${Object.keys(AGES).map((a) => html`<option value="${a}" ${q.age === a ? 'selected' : ''}>last ${a}</option>`)}
        </select></label
      >
      <button>Filter</button> <a href="${BASE}">Clear</a>
    </form>
    <table class="tasks">
      <thead>
        <tr>
          <th>Task</th>
          <th>Tool</th>
          <th>Principal</th>
          <th>Status</th>
          <th>Message</th>
          <th>Created</th>
          <th>Updated</th>
          <th>Attempt</th>
        </tr>
      </thead>
      <tbody>
        ${
          tasks.length === 0
            ? html`<tr>
                <td colspan="8" class="empty">No tasks match.</td>
              </tr>`
            : tasks.map(
                (t) =>
                  html`<tr data-task-id="${t.taskId}" data-status="${t.status}">
                    <td>
                      <a class="id" href="${BASE}/tasks/${encodeURIComponent(t.taskId)}">${t.taskId}</a>
                    </td>
                    <td>${t.toolName}</td>
                    <td>${t.principal}</td>
                    <td>${badge(t.status)}</td>
                    <td class="msg">${truncate(t.statusMessage ?? '', LIST_TEXT_CHARS)}</td>
                    <td title="${iso(t.createdAt)}">${ago(t.createdAt)}</td>
                    <td title="${iso(t.lastUpdatedAt)}">${ago(t.lastUpdatedAt)}</td>
                    <td>
                      ${t.attempt}${t.failures > 0 ? html` <span class="muted">(${t.failures} crashed)</span>` : ''}
                    </td>
                  </tr>`,
              )
        }
      </tbody>
    </table>
    <p class="muted">${tasks.length} shown, newest first (at most 200).</p>`;
  return layout('Tasks', body, csrf);
}

interface TimelineEvent {
  at: Date;
  what: Html;
}

function taskPage(
  { task, steps, stepFailures, inputRequests, attempts, artifacts }: TaskHistory,
  csrf: string,
): Html {
  const active = (ACTIVE_STATUSES as readonly string[]).includes(task.status);
  const events: TimelineEvent[] = [
    { at: task.createdAt, what: html`Created by <b>${task.principal}</b> (tool ${task.toolName})` },
    ...attempts.map((a) => ({
      at: a.claimedAt,
      what: html`Attempt ${a.attempt} started on worker <code>${a.workerId}</code>, lease until
        ${iso(a.leaseExpiresAt)}`,
    })),
    ...shownSteps(steps),
    ...stepFailures.map((f) => ({
      at: f.at,
      what: html`Step <code>${f.name}</code> failed (${f.failures} time${f.failures === 1 ? '' : 's'}, last:
        <span class="status-message">${f.lastError.slice(0, 300)}</span>)`,
    })),
    ...inputRequests.flatMap((r) => [
      { at: r.askedAt, what: html`Asked for input <code>${r.key}</code> (${r.method})` },
      ...(r.answeredAt === null
        ? []
        : [{ at: r.answeredAt, what: html`Input <code>${r.key}</code> answered` }]),
    ]),
    ...(task.cancelRequestedAt === null
      ? []
      : [{ at: task.cancelRequestedAt, what: html`Cancel requested` }]),
    ...(active ? [] : [{ at: task.lastUpdatedAt, what: html`Ended ${badge(task.status)}` }]),
  ].sort((a, b) => a.at.getTime() - b.at.getTime());
  const outcome = task.error ?? task.result;
  const body = html` <h1>Task <code>${task.taskId}</code> ${badge(task.status)}</h1>
    <dl class="facts">
      <dt>Tool</dt>
      <dd>${task.toolName}</dd>
      <dt>Principal</dt>
      <dd>${task.principal}</dd>
      <dt>Status message</dt>
      <dd class="status-message">${truncate(task.statusMessage ?? '—', PAGE_TEXT_CHARS)}</dd>
      <dt>Created</dt>
      <dd>${iso(task.createdAt)} (${ago(task.createdAt)})</dd>
      <dt>Last updated</dt>
      <dd>${iso(task.lastUpdatedAt)}</dd>
      <dt>Expires</dt>
      <dd>${task.expiresAt === null ? 'never' : iso(task.expiresAt)}</dd>
      <dt>Attempt</dt>
      <dd>${task.attempt}${task.failures > 0 ? ` (${task.failures} crashed)` : ''}</dd>
      <dt>Lease</dt>
      <dd>
        ${task.leasedBy === null ? '—' : html`<code>${task.leasedBy}</code> until ${iso(task.leaseExpiresAt)}`}
      </dd>
      ${
        task.origin === null
          ? ''
          : html`<dt>Origin</dt>
              <dd><code>${task.origin}</code></dd>`
      }
    </dl>
    ${
      active
        ? html`<form
            method="post"
            action="${BASE}/tasks/${encodeURIComponent(task.taskId)}/cancel"
            class="cancel"
          >
            <input type="hidden" name="csrf" value="${csrf}" />
            <button class="danger" ${task.cancelRequestedAt === null ? '' : 'disabled'}>
              ${task.cancelRequestedAt === null ? 'Cancel task' : 'Cancel requested'}
            </button>
          </form>`
        : ''
    }
    <h2>Timeline</h2>
    <ol class="timeline">
      ${events.map((e) => html`<li><time>${iso(e.at)}</time> ${e.what}</li>`)}
    </ol>
    ${artifacts.length === 0 ? '' : artifactsTable(task.taskId, artifacts)}
    ${
      outcome === null
        ? ''
        : html`<h2>${task.error === null ? 'Result' : 'Error'}</h2>
            <pre class="outcome">${truncate(JSON.stringify(outcome, null, 2), 20_000)}</pre>`
    }
    <p class="muted">
      Input answers are never shown.${active ? ' This page refreshes every 2 s while the task runs.' : ''}
    </p>`;
  return layout(`Task ${task.taskId}`, body, csrf, active ? 2 : undefined);
}

/**
 * A task's artifacts: what they are, without a download link. The operator's sign-in is not the task's
 * principal, whose credential a download takes; the URI says what that principal reads with resources/read.
 */
function artifactsTable(taskId: string, artifacts: TaskHistory['artifacts']): Html {
  return html`<h2>Artifacts</h2>
    <table class="artifacts">
      <thead>
        <tr>
          <th>Name</th>
          <th>Type</th>
          <th>Size</th>
          <th>SHA-256</th>
          <th>Completed</th>
          <th>URI</th>
        </tr>
      </thead>
      <tbody>
        ${artifacts.map(
          (a) =>
            html`<tr>
              <td class="name">${a.name}</td>
              <td>${a.mimeType}</td>
              <td class="size">${formatBytes(a.size)} <span class="muted">(${a.size} bytes)</span></td>
              <td><code title="${a.sha256}">${a.sha256.slice(0, 12)}</code></td>
              <td>${iso(a.completedAt)}</td>
              <td><code>${artifactUri(taskId, a.name)}</code></td>
            </tr>`,
        )}
      </tbody>
    </table>
    <p class="muted">
      Only the task's principal reads an artifact, with its own credential: <code>resources/read</code> on the
      URI, or the download link in the task's result.
    </p>`;
}

/** A long job's steps: the first and the last 100, and how many lie between. */
function shownSteps(steps: TaskHistory['steps']): TimelineEvent[] {
  const event = (s: TaskHistory['steps'][number]): TimelineEvent => ({
    at: s.at,
    what: html`Step <code>${s.name}</code> done (attempt ${s.attempt})`,
  });
  if (steps.length <= 200) return steps.map(event);
  const hidden = steps.length - 200;
  return [
    ...steps.slice(0, 100).map(event),
    { at: steps[100]!.at, what: html`<span class="muted">… ${hidden} more steps …</span>` },
    ...steps.slice(-100).map(event),
  ];
}

/**
 * Client-controlled text is shown cut (a status message may be 250 kB: 40 of them made a 40 MB list):
 * this much in the list, this much on a task's page.
 */
const LIST_TEXT_CHARS = 200;
const PAGE_TEXT_CHARS = 4_000;

const truncate = (s: string, max: number) =>
  s.length <= max ? s : `${s.slice(0, max)}\n… (${s.length - max} more characters)`;

// ---- charts: inline SVG, no script ----

const W = 600;
const H = 120;

function throughputChart(series: ActivityMinute[]): Html {
  const max = Math.max(1, ...series.map((m) => Math.max(m.created, m.finished)));
  const bw = W / series.length;
  const bars = series.map((m, i) => {
    const hc = (m.created / max) * (H - 14);
    const hf = (m.finished / max) * (H - 14);
    return raw(
      `<rect class="created" x="${(i * bw).toFixed(1)}" y="${(H - hc).toFixed(1)}" width="${(bw / 2).toFixed(1)}" height="${hc.toFixed(1)}"><title>${iso(m.minute)}: ${m.created} created</title></rect>` +
        `<rect class="finished" x="${(i * bw + bw / 2).toFixed(1)}" y="${(H - hf).toFixed(1)}" width="${(bw / 2).toFixed(1)}" height="${hf.toFixed(1)}"><title>${iso(m.minute)}: ${m.finished} finished</title></rect>`,
    );
  });
  return html`<svg
    class="chart"
    viewBox="0 0 ${W} ${H}"
    role="img"
    aria-label="tasks created and finished per minute"
  >
    ${bars}
    <text x="2" y="10">${max}/min</text>
  </svg>`;
}

function backlogChart(series: ActivityMinute[]): Html {
  const max = Math.max(1, ...series.map((m) => m.inFlight));
  const step = W / Math.max(1, series.length - 1);
  const points = series.map(
    (m, i) => `${(i * step).toFixed(1)},${(H - (m.inFlight / max) * (H - 14)).toFixed(1)}`,
  );
  const last = series.at(-1)?.inFlight ?? 0;
  return html`<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="tasks in flight per minute">
    ${raw(`<polyline class="backlog" points="${points.join(' ')}"/>`)}
    <text x="2" y="10">max ${max}, now ${last}</text>
  </svg>`;
}

const STYLE = `
:root { --fg:#1d2330; --muted:#6b7385; --bg:#f6f7f9; --card:#fff; --line:#e2e5ea; --accent:#3559e0;
  --working:#2f6fdf; --input_required:#b7791f; --completed:#2f855a; --failed:#c53030; --cancelled:#718096; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--fg); background:var(--bg); }
header { display:flex; align-items:center; gap:1.5rem; padding:.6rem 1.2rem; background:#1d2330; color:#fff; }
header a { color:#fff; text-decoration:none; } header .brand { font-weight:700; }
header nav { flex:1; } header form { margin:0; }
button.link { background:none; border:0; color:#cdd3df; cursor:pointer; font:inherit; }
main { padding:1.2rem; max-width:1400px; margin:0 auto; }
h1 { font-size:1.3rem; } h2 { font-size:1.05rem; margin-top:1.6rem; }
code { font:12px ui-monospace, SFMono-Regular, Menlo, monospace; }
.cards { display:flex; flex-wrap:wrap; gap:.6rem; }
.card { background:var(--card); border:1px solid var(--line); border-left:4px solid var(--accent); border-radius:6px;
  padding:.5rem .8rem; min-width:120px; display:flex; flex-direction:column; color:inherit; text-decoration:none; }
.card .n { font-size:1.4rem; font-weight:700; }
${TASK_STATUSES.map((s) => `.card.${s} { border-left-color:var(--${s}); } .badge.${s} { background:var(--${s}); }`).join('\n')}
.card.queue { border-left-color:#805ad5; }
.charts { display:grid; grid-template-columns:repeat(auto-fit, minmax(360px, 1fr)); gap:1rem; margin:1rem 0; }
figure { margin:0; background:var(--card); border:1px solid var(--line); border-radius:6px; padding:.6rem; }
figcaption { color:var(--muted); font-size:12px; margin-bottom:.3rem; }
.chart { width:100%; height:120px; } .chart text { font-size:10px; fill:var(--muted); }
rect.created, .k.created { fill:#7f9cf5; color:#4c6fe0; } rect.finished, .k.finished { fill:#48bb78; color:#2f855a; }
polyline.backlog { fill:none; stroke:var(--input_required); stroke-width:2; }
.filters { display:flex; flex-wrap:wrap; align-items:end; gap:.8rem; background:var(--card); border:1px solid var(--line);
  border-radius:6px; padding:.6rem .8rem; margin-bottom:1rem; }
.filters fieldset { border:0; padding:0; margin:0; display:flex; gap:.6rem; } .filters legend { color:var(--muted); font-size:12px; }
.filters label { display:flex; flex-direction:column; font-size:12px; color:var(--muted); }
.filters fieldset label { flex-direction:row; align-items:center; gap:.2rem; color:var(--fg); font-size:13px; }
input, select, button { font:inherit; padding:.25rem .4rem; }
button { border:1px solid var(--line); background:#fff; border-radius:4px; cursor:pointer; }
button.danger { background:var(--failed); color:#fff; border-color:var(--failed); } button[disabled] { opacity:.6; cursor:default; }
table.tasks, table.artifacts { width:100%; border-collapse:collapse; background:var(--card); border:1px solid var(--line); }
table.tasks th, table.tasks td, table.artifacts th, table.artifacts td { text-align:left; padding:.35rem .6rem;
  border-bottom:1px solid var(--line); white-space:nowrap; }
table.artifacts td.name { white-space:normal; overflow-wrap:anywhere; }
table.tasks td.msg { white-space:normal; color:var(--muted); max-width:320px; }
.badge { color:#fff; border-radius:10px; padding:.05rem .5rem; font-size:12px; white-space:nowrap; vertical-align:middle; }
.muted, .empty { color:var(--muted); }
dl.facts { display:grid; grid-template-columns:max-content 1fr; gap:.25rem 1rem; background:var(--card); border:1px solid var(--line);
  border-radius:6px; padding:.8rem; } dl.facts dt { color:var(--muted); } dl.facts dd { margin:0; }
ol.timeline { list-style:none; padding:0; border-left:2px solid var(--line); margin-left:.4rem; }
ol.timeline li { padding:.2rem 0 .2rem .8rem; } ol.timeline time { color:var(--muted); font-size:12px; margin-right:.4rem; }
pre.outcome { background:#1d2330; color:#e2e8f0; padding:.8rem; border-radius:6px; overflow:auto; max-height:420px; }
body.login main { max-width:360px; margin:12vh auto; background:var(--card); border:1px solid var(--line); border-radius:8px; padding:1.5rem; }
body.login label { display:flex; flex-direction:column; gap:.3rem; margin-bottom:.8rem; } .error { color:var(--failed); }
`;
