import type { JsonObject } from '../../core/wire.ts';
import type { TriggerVerifier } from './verify.ts';

/**
 * A webhook trigger: `POST /triggers/{name}` on any instance starts a task of `tool`, owned by
 * `principal`, once per delivery. The request is verified first (`verify`), on its raw bytes; only then
 * is its body parsed as JSON and mapped to the tool's arguments.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each sender has its own body shape
export interface TriggerDefinition<Body = any> {
  /** The path segment: `POST /triggers/{name}`. Letters, digits, `_` and `-`, at most 64. */
  readonly name: string;
  /** The name of the tool whose task a delivery starts (one of the module's tools). */
  readonly tool: string;
  /** Who owns the tasks (who may read and cancel them over MCP). */
  readonly principal: string;
  /** Checks the request's signature or token: `hmacSha256(…)`, `stripeSignature(…)`, `bearer(…)`. */
  readonly verify: TriggerVerifier;
  /**
   * The tool's arguments from the delivery's JSON body (none: `null`) and headers; checked against the
   * tool's schema as a client's `tools/call` is (a refusal is 422, with nothing stored). A throw is 422 too.
   */
  readonly arguments: (body: Body, headers: Headers) => JsonObject;
  /**
   * What makes a delivery the same delivery again (GitHub's `X-GitHub-Delivery` header, a Stripe event's
   * `id`): a redelivery gets the task of the first. 1 to 255 characters.
   */
  readonly idempotencyKey: (body: Body, headers: Headers) => string;
}

/** The form of a trigger's name (a path segment that needs no escaping). */
export const TRIGGER_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Declares a webhook trigger. Export it as `triggers` from the tools module (or pass it to
 * `createServer({ triggers })`):
 *
 * ```ts
 * export const triggers = [
 *   defineTrigger({
 *     name: 'github-push',
 *     tool: 'build',
 *     principal: 'ci',
 *     verify: hmacSha256({ secret: { env: 'GITHUB_WEBHOOK_SECRET' }, header: 'X-Hub-Signature-256', prefix: 'sha256=' }),
 *     arguments: (body) => ({ repo: body.repository.full_name, sha: body.after }),
 *     idempotencyKey: (_body, headers) => headers.get('X-GitHub-Delivery') ?? '',
 *   }),
 * ];
 * ```
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each sender has its own body shape
export function defineTrigger<Body = any>(def: TriggerDefinition<Body>): TriggerDefinition<Body> {
  if (typeof def.name !== 'string' || !TRIGGER_NAME.test(def.name)) {
    throw new Error(
      `defineTrigger: name ${JSON.stringify(def.name)} must be 1 to 64 letters, digits, _ or -`,
    );
  }
  const what = `defineTrigger ${def.name}`;
  if (typeof def.tool !== 'string' || def.tool === '') throw new Error(`${what}: tool must be a tool's name`);
  if (typeof def.principal !== 'string' || def.principal === '') {
    throw new Error(`${what}: principal must be a non-empty string`);
  }
  for (const fn of ['verify', 'arguments', 'idempotencyKey'] as const) {
    if (typeof def[fn] !== 'function') throw new Error(`${what}: ${fn} must be a function`);
  }
  return Object.freeze({ ...def });
}
