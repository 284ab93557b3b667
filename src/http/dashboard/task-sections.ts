// The sections of a task's page that answer "why": what it was asked (its arguments, secrets redacted by
// the store), what it waits for (a pending question), how each attempt ended (outcome, error, stack), and
// what it made (artifacts).
import { html } from 'hono/html';
import { artifactUri } from '../../core/artifacts.ts';
import { formatBytes } from '../../core/bytes.ts';
import type { TaskHistory } from '../../tasks/store/admin-task.ts';
import { ago, iso, PAGE_TEXT_CHARS, truncate, type Html } from './format.ts';

/** Arguments are shown up to this many bytes of pretty JSON (a task's arguments may be megabytes). */
export const ARGUMENTS_SHOWN_BYTES = 16 * 1024;

/** `json`'s first `max` bytes (whole characters), and a line saying how large it is when that is not all. */
export function cappedJson(value: unknown, max = ARGUMENTS_SHOWN_BYTES): string {
  const json = JSON.stringify(value, null, 2) ?? 'undefined';
  const bytes = Buffer.byteLength(json);
  if (bytes <= max) return json;
  const { read } = new TextEncoder().encodeInto(json, new Uint8Array(max));
  return `${json.slice(0, read)}\n… (${bytes} bytes)`;
}

export function argumentsSection(args: unknown): Html {
  return html`<h2>Arguments</h2>
    <pre class="arguments">${cappedJson(args)}</pre>
    <p class="muted">Fields the tool marks secret are shown as "[redacted]".</p>`;
}

/** The questions the task waits on, first on its page: what the client's user is being asked. */
export function waitingSection(inputRequests: TaskHistory['inputRequests']): Html {
  const pending = inputRequests.filter((r) => r.answeredAt === null);
  if (pending.length === 0) return html``;
  return html`<section class="waiting" role="status">
    ${pending.map(
      (r) =>
        html`<p>
          <b>Waiting for input:</b>
          <span class="question"
            >${truncate(r.question ?? `(${r.method}, no message)`, PAGE_TEXT_CHARS)}</span
          >
          <span class="muted">— <code>${r.key}</code>, ${r.method}, asked ${ago(r.askedAt)}</span>
        </p>`,
    )}
  </section>`;
}

type Attempt = TaskHistory['attempts'][number];

/** An attempt without a recorded end: running, or its worker stopped before it could say. */
function unended(a: Attempt, task: TaskHistory['task']): Html {
  const current = a.attempt === task.attempt && task.leasedBy === a.workerId;
  return current
    ? html`<span class="outcome running">running</span>`
    : html`<span class="muted" title="no outcome was recorded: its worker stopped (or lost its lease) first"
        >— (worker gone)</span
      >`;
}

/** A leg whose handler still runs past its cancel grace: it holds its worker's slot until it returns. */
function stuckMark(a: Attempt): Html {
  if (a.stuckSince === null) return html``;
  return html`<span
    class="outcome stuck"
    title="its handler ignored the cancel and still runs on worker ${a.workerId}, holding a slot until it returns (or that worker stops)"
    >stuck leg since ${iso(a.stuckSince)}</span
  >`;
}

function errorCell(a: Attempt): Html {
  if (a.errorMessage === null) return html``;
  return html`<span class="error-message">${truncate(a.errorMessage, PAGE_TEXT_CHARS)}</span> ${
      a.errorStack === null
        ? ''
        : html`<details class="stack">
            <summary>Stack</summary>
            <pre>${truncate(a.errorStack, PAGE_TEXT_CHARS)}</pre>
          </details>`
    }`;
}

/** Each attempt: where it ran, when, how it ended and with what error. */
export function attemptsTable(attempts: TaskHistory['attempts'], task: TaskHistory['task']): Html {
  if (attempts.length === 0) return html``;
  return html`<h2>Attempts</h2>
    <table class="attempts">
      <thead>
        <tr>
          <th>#</th>
          <th>Worker</th>
          <th>Claimed</th>
          <th>Ended</th>
          <th>Outcome</th>
          <th>Error</th>
        </tr>
      </thead>
      <tbody>
        ${attempts.map(
          (a) =>
            html`<tr data-attempt="${a.attempt}">
              <td>${a.attempt}</td>
              <td><code>${a.workerId}</code></td>
              <td>${iso(a.claimedAt)}</td>
              <td>${iso(a.endedAt)}</td>
              <td>
                ${a.outcome === null ? unended(a, task) : html`<span class="outcome ${a.outcome}">${a.outcome}</span>`}
                ${stuckMark(a)}
              </td>
              <td class="error">${errorCell(a)}</td>
            </tr>`,
        )}
      </tbody>
    </table>`;
}

/**
 * A task's artifacts: what they are, without a download link. The operator's sign-in is not the task's
 * principal, whose credential a download takes; the URI says what that principal reads with resources/read.
 */
export function artifactsTable(taskId: string, artifacts: TaskHistory['artifacts']): Html {
  if (artifacts.length === 0) return html``;
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
