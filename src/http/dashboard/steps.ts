// A task's durable steps on its timeline, collapsed by name pattern: fifty `chunk-1` … `chunk-50` are one
// row `chunk-* ×50 (first at …, last at …)` that opens (<details>, no script) onto the fifty.
import { html } from 'hono/html';
import type { TaskHistory } from '../../tasks/store/admin-task.ts';
import { iso, type Html } from './format.ts';

type Step = TaskHistory['steps'][number];

/** One row of a timeline: when, and what happened. */
export interface TimelineEvent {
  at: Date;
  what: Html;
}

/**
 * What a step name has in common with its siblings: its digits as `*` (`chunk-17` → `chunk-*`), and a
 * namespaced name's part after the prefix (`artifact:export.csv` → `artifact:*`).
 */
export function stepPattern(name: string): string {
  const namespace = /^([A-Za-z][\w-]*):./s.exec(name);
  return namespace === null ? name.replace(/\d+/g, '*') : `${namespace[1]}:*`;
}

/** Steps with the same pattern, in the order they completed (one group per pattern, at its first step). */
export function groupSteps(steps: readonly Step[]): { pattern: string; steps: Step[] }[] {
  const groups = new Map<string, Step[]>();
  for (const step of steps) {
    const pattern = stepPattern(step.name);
    const group = groups.get(pattern);
    if (group === undefined) groups.set(pattern, [step]);
    else group.push(step);
  }
  return [...groups].map(([pattern, members]) => ({ pattern, steps: members }));
}

/** A group opened: at most this many of its steps, the first and last halves. */
const SHOWN_IN_GROUP = 100;
/** A timeline: at most this many step rows (groups and single steps), the first and last halves. */
const SHOWN_ROWS = 200;

/** The first and last `max / 2` of `items`, with a row saying how many lie between. */
function elided<T, R>(
  items: readonly T[],
  max: number,
  row: (t: T) => R,
  between: (n: number, next: T) => R,
) {
  if (items.length <= max) return items.map(row);
  const half = max / 2;
  return [
    ...items.slice(0, half).map(row),
    between(items.length - max, items[half]!),
    ...items.slice(-half).map(row),
  ];
}

const attemptsOf = (steps: readonly Step[]) => {
  const attempts = steps.map((s) => s.attempt);
  const lo = Math.min(...attempts);
  const hi = Math.max(...attempts);
  return lo === hi ? `attempt ${lo}` : `attempts ${lo}–${hi}`;
};

function groupRow(pattern: string, steps: Step[]): TimelineEvent {
  const first = steps[0]!;
  const last = steps.at(-1)!;
  const items = elided(
    steps,
    SHOWN_IN_GROUP,
    (s) => html`<li><time>${iso(s.at)}</time> <code>${s.name}</code> (attempt ${s.attempt})</li>`,
    (n) => html`<li class="muted">… ${n} more …</li>`,
  );
  return {
    at: first.at,
    what: html`<details class="steps">
      <summary>
        Steps <code class="pattern">${pattern}</code> <b class="count">×${steps.length}</b> done (first at
        ${iso(first.at)}, last at ${iso(last.at)}, ${attemptsOf(steps)})
      </summary>
      <ol>
        ${items}
      </ol>
    </details>`,
  };
}

/** The steps as timeline rows: one per pattern shared by several steps, one per other step. */
export function stepEvents(steps: readonly Step[]): TimelineEvent[] {
  const rows = groupSteps(steps).map(({ pattern, steps: members }) =>
    members.length === 1
      ? {
          at: members[0]!.at,
          what: html`Step <code>${members[0]!.name}</code> done (attempt ${members[0]!.attempt})`,
        }
      : groupRow(pattern, members),
  );
  return elided(
    rows,
    SHOWN_ROWS,
    (r) => r,
    (n, next) => ({ at: next.at, what: html`<span class="muted">… ${n} more steps …</span>` }),
  );
}
