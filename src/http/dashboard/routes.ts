// The operator's task dashboard at /dashboard: server-rendered HTML with no script and no CDN, off unless
// DASHBOARD_TOKEN is set (session.ts says who may use it). Reads go through the store's admin functions;
// the cancel button takes the tasks/cancel store path.
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { html } from 'hono/html';
import type { Logger } from '../../log.ts';
import { TaskNotFoundError } from '../../tasks/errors.ts';
import { adminActivity, adminCancelTask, adminGetTask, adminListTasks } from '../../tasks/store/admin.ts';
import { readStoreStats } from '../../tasks/store/stats.ts';
import { RANGES, rangeOf } from './charts.ts';
import { BASE } from './format.ts';
import { layout, loginPage } from './layout.ts';
import { filterOf, listPage } from './list-page.ts';
import {
  formChecked,
  sameOriginForms,
  securityHeaders,
  signedIn,
  signIn,
  signOut,
  type Env,
} from './session.ts';
import { STYLE } from './style.ts';
import { taskPage } from './task-page.ts';

export interface DashboardOptions {
  /** The admin credential (DASHBOARD_TOKEN). */
  token: string;
  db: Parameters<typeof adminListTasks>[0];
  /** The registered tools, for the filter. */
  tools: readonly string[];
  bossSchema?: string | undefined;
  log: Logger;
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
    const csrf = c.get('csrf');
    return c.html(listPage({ tasks, stats, activity, range, filter, tools: opts.tools, csrf }));
  });
  app.get('/tasks/:id', auth, async (c) => {
    const history = await adminGetTask(opts.db, c.req.param('id'));
    const csrf = c.get('csrf');
    if (history === undefined)
      return c.html(layout('Not found', html`<p>No task ${c.req.param('id').slice(0, 64)}.</p>`, csrf), 404);
    return c.html(taskPage(history, csrf));
  });
  app.post('/tasks/:id/cancel', auth, formChecked, async (c) => {
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
