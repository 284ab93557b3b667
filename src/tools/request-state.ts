import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import { InputResponsesSchema, type InputResponses } from '../core/wire.ts';

/** Stable JSON: object keys sorted, so equal values give equal digests. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export function digest(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('base64url');
}

const PayloadSchema = z.object({
  v: z.literal(1),
  p: z.string(),
  m: z.string(),
  d: z.string(),
  e: z.number(),
  r: InputResponsesSchema,
});

/** What a requestState is bound to: who asked, which request (method + name + arguments), until when. */
export interface RequestStateBinding {
  principal: string;
  /** e.g. `tools/call:confirm_action` */
  request: string;
  arguments: unknown;
}

/**
 * Integrity-protected MRTR requestState (HMAC-SHA256): carries the input responses gathered in earlier
 * rounds, bound to the principal, the request and an expiry, so tampered or replayed state is rejected.
 */
export class RequestStateSealer {
  readonly #key: Buffer;
  readonly #ttlMs: number;

  constructor(secret: string | Buffer, ttlMs = 10 * 60_000) {
    this.#key = createHash('sha256').update(secret).digest();
    this.#ttlMs = ttlMs;
  }

  seal(binding: RequestStateBinding, responses: InputResponses, now = Date.now()): string {
    const payload = {
      v: 1,
      p: binding.principal,
      m: binding.request,
      d: digest(binding.arguments),
      e: now + this.#ttlMs,
      r: responses,
    } satisfies z.infer<typeof PayloadSchema>;
    const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
    return `${body}.${this.#mac(body)}`;
  }

  /** The responses carried by `state`; -32602 when it was tampered with, expired or is bound elsewhere. */
  open(state: string, binding: RequestStateBinding, now = Date.now()): InputResponses {
    const invalid = () => new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid requestState');
    const [body, mac, extra] = state.split('.');
    if (body === undefined || mac === undefined || extra !== undefined) throw invalid();
    const expected = Buffer.from(this.#mac(body));
    const given = Buffer.from(mac);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw invalid();
    let parsed: z.infer<typeof PayloadSchema>;
    try {
      parsed = PayloadSchema.parse(JSON.parse(Buffer.from(body, 'base64url').toString('utf8')));
    } catch {
      throw invalid();
    }
    if (
      parsed.p !== binding.principal ||
      parsed.m !== binding.request ||
      parsed.d !== digest(binding.arguments) ||
      parsed.e < now
    ) {
      throw invalid();
    }
    return parsed.r;
  }

  #mac(body: string): string {
    return createHmac('sha256', this.#key).update(body).digest('base64url');
  }
}
