import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { isStorable } from '../core/limits.ts';
import type { Logger } from '../log.ts';
import { jsonDepth } from '../core/json-depth.ts';
import type { SignalDelivery } from '../core/signal-delivery.ts';
import type { IsDatabaseUnavailable } from '../core/unavailable.ts';
import { databaseUnavailable } from './unavailable.ts';

export interface SignalRoutesOptions {
  deliver: (token: string, payload: unknown) => Promise<SignalDelivery>;
  /** Largest body accepted (413 above). */
  maxBytes: number;
  maxJsonDepth: number;
  log: Logger;
  /** A delivery the database's absence stopped is 503 with Retry-After: the sender retries it later. */
  isDatabaseUnavailable: IsDatabaseUnavailable;
}

/** The answer for each delivery outcome: the token is the only credential, so unknown and refused differ only in what they say. */
const ANSWERS: Record<SignalDelivery, { status: 202 | 404 | 409; message: string }> = {
  delivered: { status: 202, message: 'delivered' },
  unknown: { status: 404, message: 'no such signal' },
  already_delivered: { status: 409, message: 'this signal was already delivered' },
  timed_out: { status: 409, message: 'this signal timed out before it was delivered' },
  task_ended: { status: 409, message: 'the task waiting for this signal has ended' },
};

/**
 * `POST /signals/{token}`: delivers a task's signal with the request's JSON body (none: `null`). The
 * token is the credential (a webhook or a third party calls it without any other): it works once.
 */
export function signalRoutes(opts: SignalRoutesOptions): Hono {
  const app = new Hono();
  const tooLarge = { error: `the body exceeds ${opts.maxBytes} bytes` };
  app.post(
    '/:token',
    bodyLimit({ maxSize: opts.maxBytes, onError: (c) => c.json(tooLarge, 413) }),
    async (c) => {
      const token = c.req.param('token');
      if (!/^[A-Za-z0-9_-]{16,64}$/.test(token)) return c.json({ error: ANSWERS.unknown.message }, 404);
      const text = await c.req.text();
      let payload: unknown = null;
      if (text.trim() !== '') {
        if (jsonDepth(text) > opts.maxJsonDepth) return c.json({ error: 'the body nests too deeply' }, 400);
        try {
          payload = JSON.parse(text);
        } catch {
          return c.json({ error: 'the body is not JSON' }, 400);
        }
        if (!isStorable(payload))
          return c.json({ error: 'the body holds characters that cannot be stored' }, 400);
      }
      let outcome: SignalDelivery;
      try {
        outcome = await opts.deliver(token, payload);
      } catch (err) {
        if (!opts.isDatabaseUnavailable(err)) throw err;
        return databaseUnavailable(c, opts.log, err, { error: 'the database is unavailable: retry later' });
      }
      const answer = ANSWERS[outcome];
      if (outcome === 'delivered') opts.log.info('signal delivered', { bytes: text.length });
      return c.json(
        answer.status === 202 ? { status: answer.message } : { error: answer.message },
        answer.status,
      );
    },
  );
  return app;
}
