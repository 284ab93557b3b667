// The operator's task dashboard at /dashboard: server-rendered HTML with no CDN and no script but a running
// task's live event log (event-log.ts), off unless DASHBOARD_TOKEN is set (sign-in.ts says who may use it). Reads go through the store's admin functions;
// an operator's actions (task-actions.ts) through the store paths the CLI takes.
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { html } from 'hono/html';
import { listSchedules } from '../../launch/schedules/list.ts';
import { adminActivity } from '../../tasks/store/admin-activity.ts';
import { adminListTasks } from '../../tasks/store/admin-list.ts';
import { adminGetTask } from '../../tasks/store/admin-task.ts';
import { readStoreStats } from '../../tasks/store/stats.ts';
import type { TaskEventStreamOptions } from '../task-event-stream.ts';
import { RANGES, rangeOf } from './charts.ts';
import { addEventStream, latestEvents, LIVE_SCRIPT_SOURCES } from './event-log.ts';
import { layout, loginPage } from './layout.ts';
import { filterOf, listPage } from './list-page.ts';
import {
  contentSecurityPolicy,
  formChecked,
  sameOriginForms,
  securityHeaders,
  signedIn,
  signIn,
  signOut,
  type Env,
} from './sign-in.ts';
import { STYLE } from './style.ts';
import { schedulesPage } from './schedules-page.ts';
import { addTaskActions, type TaskActionOptions, viewerOf } from './task-actions.ts';
import { refreshesItself, taskPage } from './task-page.ts';

export interface DashboardOptions extends TaskActionOptions {
  /** The admin credential (DASHBOARD_TOKEN). */
  token: string;
  /** The registered tools, for the filter. */
  tools: readonly string[];
  bossSchema?: string | undefined;
  /** A task's events as they are written, for its page's live event log (a static log without). */
  events?: TaskEventStreamOptions | undefined;
}

export function dashboardRoutes(opts: DashboardOptions): Hono<Env> {
  const app = new Hono<Env>();
  const auth = signedIn(opts);

  app.use('*', securityHeaders);
  app.get('/style.css', (c) =>
    c.body(STYLE, 200, { 'content-type': 'text/css; charset=utf-8', 'cache-control': 'max-age=3600' }),
  );
  app.use('*', bodyLimit({ maxSize: 16 * 1024, onError: (c) => c.text('Payload too large', 413) }));
  app.use('*', sameOriginForms);

  app.get('/login', (c) => c.html(loginPage(), 200));
  app.post('/login', signIn(opts));
  app.post('/logout', auth, formChecked, signOut(opts));

  app.get('/', auth, async (c) => {
    const filter = filterOf(c);
    const range = rangeOf(c.req.query('range'));
    const [tasks, stats, activity] = await Promise.all([
      adminListTasks(opts.db, filter),
      readStoreStats(opts.db, opts.bossSchema),
      adminActivity(opts.db, RANGES[range].minutes),
    ]);
    return c.html(
      listPage({ tasks, stats, activity, range, filter, tools: opts.tools, viewer: viewerOf(c) }),
    );
  });
  app.get('/schedules', auth, async (c) => c.html(schedulesPage(await listSchedules(opts.db), viewerOf(c))));
  app.get('/tasks/:id', auth, async (c) => {
    const history = await adminGetTask(opts.db, c.req.param('id'));
    if (history === undefined)
      return c.html(
        layout('Not found', html`<p>No task ${c.req.param('id').slice(0, 64)}.</p>`, viewerOf(c)),
        404,
      );
    // (The live page's script reads the rest of the page again without its events: `?events=none`.)
    const events = c.req.query('events') === 'none' ? undefined : await latestEvents(opts.db, history.task);
    const followable = opts.events !== undefined;
    if (followable && refreshesItself(history.task))
      c.header('Content-Security-Policy', contentSecurityPolicy(LIVE_SCRIPT_SOURCES));
    return c.html(taskPage(history, viewerOf(c), { events, followable }));
  });
  if (opts.events !== undefined) addEventStream(app, auth, { db: opts.db, events: opts.events });
  addTaskActions(app, auth, opts);
  return app;
}
