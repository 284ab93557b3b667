// A task's event log on its page: the latest events, server-rendered, and, while the task runs, each new
// one as it is written. The page's one script (inline, allowed by its hash alone: the CSP of a live page
// adds that hash and connect-src 'self', nothing else) follows GET /dashboard/tasks/{id}/events with an
// EventSource (the same follower as the events endpoint, under the operator's sign-in) and reads the rest
// of the page again every 2 s, as the page's refresh did; without scripts the page still refreshes itself.
import { createHash } from 'node:crypto';
import type { Hono, MiddlewareHandler } from 'hono';
import { html, raw } from 'hono/html';
import type { WireTaskEvent } from '../../core/task-events.ts';
import { finalStatusEvent } from '../../tasks/event-follower.ts';
import { isTerminal } from '../../tasks/status.ts';
import type { AdminTask } from '../../tasks/store/admin-row.ts';
import { adminGetTask } from '../../tasks/store/admin-task.ts';
import { readTaskEvents } from '../../tasks/store/events.ts';
import { taskEventStream, type TaskEventStreamOptions } from '../task-event-stream.ts';
import { BASE, iso, truncate, type Html } from './format.ts';
import type { Env } from './sign-in.ts';

/** The page shows this many of the task's latest events (its final status counted). */
export const EVENT_LOG_SIZE = 200;
/** An event's payload is shown as JSON cut to this many characters. */
export const EVENT_PAYLOAD_CHARS = 300;

/** The task's latest events, oldest first: the stored ones still kept, and its final status once it ended. */
export async function latestEvents(
  db: Parameters<typeof adminGetTask>[0],
  task: AdminTask,
): Promise<WireTaskEvent[]> {
  const after = Math.max(0, task.eventSeq - EVENT_LOG_SIZE);
  const events = await readTaskEvents(db, task.taskId, after, EVENT_LOG_SIZE);
  if (isTerminal(task.status)) events.push(finalStatusEvent({ ...task, last: task.eventSeq }));
  return events.slice(-EVENT_LOG_SIZE);
}

const eventsHref = (taskId: string) => `${BASE}/tasks/${encodeURIComponent(taskId)}/events`;

/** The log; `live`: the page's script appends what follows the last event shown. */
export function eventLogSection(taskId: string, events: readonly WireTaskEvent[], live: boolean): Html {
  const last = events.at(-1)?.seq ?? 0;
  return html`<section
    id="event-log"
    data-src="${eventsHref(taskId)}"
    data-last="${last}"
    data-max="${EVENT_LOG_SIZE}"
    data-chars="${EVENT_PAYLOAD_CHARS}"
  >
    <h2>Events</h2>
    <table class="events">
      <thead>
        <tr>
          <th>#</th>
          <th>Time</th>
          <th>Type</th>
          <th>Payload</th>
        </tr>
      </thead>
      <tbody>
        ${events.map(
          (e) =>
            html`<tr data-seq="${e.seq}">
              <td>${e.seq}</td>
              <td><time>${iso(e.createdAt)}</time></td>
              <td><code>${e.type}</code></td>
              <td class="payload">
                <code>${truncate(JSON.stringify(e.payload), EVENT_PAYLOAD_CHARS)}</code>
              </td>
            </tr>`,
        )}
      </tbody>
    </table>
    ${events.length === 0 ? html`<p class="empty">No events${live ? ' yet' : ''}.</p>` : ''}
    <p class="muted">
      The latest ${EVENT_LOG_SIZE} events, newest last${live ? ', each shown as it is written' : ''}.
    </p>
  </section>`;
}

/**
 * The live page's script. It only ever sets text (never markup) from what the stream sends, and replaces
 * `#task` with the same element of the page read again (markup the server rendered and escaped).
 */
const LIVE_SCRIPT = `(() => {
  const log = document.getElementById('event-log');
  const rows = log.querySelector('tbody');
  const max = Number(log.dataset.max);
  const chars = Number(log.dataset.chars);
  let last = Number(log.dataset.last);
  let live = true;
  let source;
  const iso = (t) => new Date(t).toISOString().replace('T', ' ').replace(/\\.\\d+Z$/, 'Z');
  const cut = (s) => (s.length <= chars ? s : s.slice(0, chars) + '\\n… (' + (s.length - chars) + ' more characters)');
  const cell = (tr, text, tag) => {
    const td = tr.insertCell();
    (tag === undefined ? td : td.appendChild(document.createElement(tag))).textContent = text;
    return td;
  };
  function add(event) {
    if (event.seq <= last) return;
    last = event.seq;
    const tr = rows.insertRow();
    tr.dataset.seq = String(event.seq);
    cell(tr, String(event.seq));
    cell(tr, iso(event._meta['dev.durable-mcp-tasks/time']), 'time');
    cell(tr, event.type, 'code');
    cell(tr, cut(JSON.stringify(event.payload)), 'code').className = 'payload';
    while (rows.rows.length > max) rows.deleteRow(0);
    log.querySelector('.empty')?.remove();
    log.dataset.last = String(last);
  }
  function stop() {
    live = false;
    source.close();
  }
  async function refresh() {
    try {
      const res = await fetch(location.pathname + '?events=none');
      const next = new DOMParser().parseFromString(await res.text(), 'text/html').getElementById('task');
      if (next === null) return location.reload();
      document.getElementById('task').replaceWith(next);
      if (!next.hasAttribute('data-live')) stop();
    } catch {
      // The next round tries again.
    }
    if (live) setTimeout(refresh, 2000);
  }
  function connect() {
    const url = new URL(log.dataset.src, location.href);
    url.searchParams.set('after', String(last));
    source = new EventSource(url);
    source.onmessage = (message) => {
      const event = JSON.parse(message.data);
      add(event);
      if (event.type === 'dev.durable-mcp-tasks/status') source.close();
    };
    // An answer that is no stream (the task ended: 204; signed out; an outage) ends the EventSource.
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) setTimeout(() => live && connect(), 5000);
    };
  }
  connect();
  setTimeout(refresh, 2000);
})();`;

/** The CSP of a live task page: the dashboard's, with this script (by its hash) and its connections. */
export const LIVE_SCRIPT_SOURCES = `script-src 'sha256-${createHash('sha256').update(LIVE_SCRIPT).digest('base64')}'; connect-src 'self'`;

/** The script element (its text exactly what the hash is of). */
export const liveScript = (): Html => raw(`<script>${LIVE_SCRIPT}</script>`);

/** GET /tasks/{id}/events: any task's events (the operator sees every principal's), as the endpoint streams them. */
export function addEventStream(
  app: Hono<Env>,
  auth: MiddlewareHandler<Env>,
  opts: { db: Parameters<typeof adminGetTask>[0]; events: TaskEventStreamOptions },
): void {
  app.get('/tasks/:id/events', auth, async (c) => {
    const history = await adminGetTask(opts.db, c.req.param('id'));
    if (history === undefined) return c.text('Not found', 404);
    return taskEventStream(c, history.task, opts.events);
  });
}
