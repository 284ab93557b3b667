// One task's page: its facts, the cancel button, its timeline, its artifacts and its outcome.
import { html } from 'hono/html';
import { artifactUri } from '../../core/artifacts.ts';
import { formatBytes } from '../../core/bytes.ts';
import { ACTIVE_STATUSES } from '../../tasks/status.ts';
import type { TaskHistory } from '../../tasks/store/admin.ts';
import { ago, badge, BASE, iso, PAGE_TEXT_CHARS, truncate, type Html } from './format.ts';
import { layout } from './layout.ts';

interface TimelineEvent {
  at: Date;
  what: Html;
}

export function taskPage(
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
