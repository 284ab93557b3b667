import { Hono, type Context } from 'hono';
import { QuotaExceededError } from '../core/errors.ts';
import { jsonDepth } from '../core/json-depth.ts';
import type { Metrics } from '../core/metrics.ts';
import type { IsDatabaseUnavailable } from '../core/unavailable.ts';
import type { TriggerDefinition } from '../launch/triggers/define.ts';
import type { TriggerRegistry } from '../launch/triggers/registry.ts';
import { TriggerDeliveryError } from '../launch/triggers/start.ts';
import type { Logger } from '../log.ts';
import { IdempotencyConflictError } from '../tasks/errors.ts';
import type { TaskView } from '../tasks/store/view.ts';
import { databaseUnavailable } from './unavailable.ts';

/** Where a trigger is called (`POST`), below the server's origin. */
export const TRIGGERS_PATH = '/triggers';

export interface TriggerRoutesOptions {
  triggers: TriggerRegistry;
  /** Starts (or, for a redelivery, finds) the task of a verified delivery. */
  start: (trigger: TriggerDefinition, body: unknown, headers: Headers) => Promise<TaskView>;
  /** TRIGGER_MAX_BODY_BYTES: a larger body is 413, read no further. */
  maxBytes: number;
  maxJsonDepth: number;
  /** Where the 202 points (`Location`): the task's event stream, for its principal. */
  taskLocation: (taskId: string) => string;
  log: Logger;
  metrics?: Metrics | undefined;
  isDatabaseUnavailable: IsDatabaseUnavailable;
}

type Outcome =
  | 'accepted'
  | 'not_found'
  | 'unverified'
  | 'too_large'
  | 'invalid_json'
  | 'invalid_arguments'
  | 'conflict'
  | 'over_quota'
  | 'unavailable';

/**
 * The body, read as it streams in and abandoned past `maxBytes` (undefined then): a declared length
 * over it is refused before any of it is read, and an undeclared one is never held whole first.
 */
async function readBounded(request: Request, maxBytes: number): Promise<Uint8Array | undefined> {
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > maxBytes) return undefined;
  if (request.body === null) return new Uint8Array();
  const reader = (request.body as ReadableStream<Uint8Array>).getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => {});
      return undefined;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

/** The JSON body (none: `null`), or why it is not JSON. */
function parseBody(raw: Uint8Array, maxJsonDepth: number): { body: unknown } | { error: string } {
  const text = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8');
  if (text.trim() === '') return { body: null };
  if (jsonDepth(text) > maxJsonDepth) return { error: 'the body nests too deeply' };
  try {
    return { body: JSON.parse(text) as unknown };
  } catch {
    return { error: 'the body is not JSON' };
  }
}

/**
 * `POST /triggers/{name}`: a webhook delivery starts a task of the trigger's tool. Verified on its raw
 * bytes before anything else is done with it: a forged, missing or stale signature is 401 with nothing
 * stored. A redelivery (the same idempotency key) is 202 with the task of the first delivery.
 */
export function triggerRoutes(opts: TriggerRoutesOptions): Hono {
  const app = new Hono();
  const { log, metrics } = opts;
  app.post('/:name', async (c) => {
    const trigger = opts.triggers.get(c.req.param('name'));
    const answer = (
      outcome: Outcome,
      status: 202 | 400 | 401 | 404 | 409 | 413 | 422 | 429,
      body: object,
    ) => {
      metrics?.triggerRequests.inc({ trigger: trigger?.name ?? 'unknown', outcome });
      // The rest of an oversized body is never read: the connection cannot be reused.
      const headers: Record<string, string> = status === 413 ? { Connection: 'close' } : {};
      return c.json(body, status, headers);
    };
    if (trigger === undefined) return answer('not_found', 404, { error: 'no such trigger' });
    const raw = await readBounded(c.req.raw, opts.maxBytes);
    if (raw === undefined) {
      return answer('too_large', 413, { error: `the body exceeds ${opts.maxBytes} bytes` });
    }
    const verification = trigger.verify({ rawBody: raw, headers: c.req.raw.headers, now: Date.now() });
    if (!verification.verified) {
      log.warn('trigger request refused', { trigger: trigger.name, reason: verification.reason });
      return answer('unverified', 401, { error: 'the request could not be verified' });
    }
    const parsed = parseBody(raw, opts.maxJsonDepth);
    if ('error' in parsed) return answer('invalid_json', 400, { error: parsed.error });
    return startTask(c, opts, trigger, parsed.body, answer);
  });
  return app;
}

async function startTask(
  c: Context,
  opts: TriggerRoutesOptions,
  trigger: TriggerDefinition,
  body: unknown,
  answer: (outcome: Outcome, status: 202 | 409 | 422 | 429, body: object) => Response,
): Promise<Response> {
  let task: TaskView;
  try {
    task = await opts.start(trigger, body, c.req.raw.headers);
  } catch (err) {
    if (err instanceof TriggerDeliveryError) {
      opts.log.warn('trigger delivery refused', { trigger: trigger.name, error: err.message });
      return answer('invalid_arguments', 422, { error: err.message });
    }
    if (err instanceof IdempotencyConflictError) {
      return answer('conflict', 409, {
        error: 'this idempotency key started a task with other arguments',
      });
    }
    if (err instanceof QuotaExceededError) {
      if (err.retryAfterMs !== undefined) c.header('Retry-After', String(Math.ceil(err.retryAfterMs / 1000)));
      return answer('over_quota', 429, { error: err.message });
    }
    if (!opts.isDatabaseUnavailable(err)) throw err;
    opts.metrics?.triggerRequests.inc({ trigger: trigger.name, outcome: 'unavailable' });
    return databaseUnavailable(c, opts.log, err, { error: 'the database is unavailable: retry later' });
  }
  opts.log.info('trigger delivery accepted', { trigger: trigger.name, taskId: task.taskId });
  c.header('Location', opts.taskLocation(task.taskId));
  return answer('accepted', 202, { taskId: task.taskId, status: task.status });
}
