// A task's family on its page: the task that started it (ctx.callTool, ctx.spawn) and the child tasks it
// started, each a link to its own page.
import { html } from 'hono/html';
import type { TaskHistory } from '../../tasks/store/admin-task.ts';
import type { Html } from './format.ts';
import { taskHref } from './task-state.ts';

const detachedMark = (detached: boolean) => (detached ? html` <span class="muted">(detached)</span>` : '');

/** Nothing for a client's task that started no child. */
export function familySection({ parent, children }: TaskHistory): Html {
  const started =
    parent === null
      ? html``
      : html`<p class="parent">
          Started by <a href="${taskHref(parent.taskId)}"><code>${parent.taskId}</code></a> as
          <code>${parent.name}</code>${detachedMark(parent.detached)}
        </p>`;
  if (children.length === 0) return started;
  return html`${started}
    <h2>Children</h2>
    <table class="tasks children">
      <thead>
        <tr>
          <th>Task</th>
          <th>Name</th>
          <th>Tool</th>
          <th>Status</th>
        </tr>
      </thead>
      <tbody>
        ${children.map(
          (c) =>
            html`<tr>
              <td>
                <a href="${taskHref(c.taskId)}"><code>${c.taskId}</code></a>
              </td>
              <td>${c.name}${detachedMark(c.detached)}</td>
              <td>${c.toolName}</td>
              <td>${c.status}</td>
            </tr>`,
        )}
      </tbody>
    </table>`;
}
