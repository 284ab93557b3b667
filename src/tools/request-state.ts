import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createHmac,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
} from 'node:crypto';
import { z } from 'zod';
import { decodeCanonicalBase64url } from '../core/base64url.ts';
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

/** A sealed state of this version: `2.<iv>.<ciphertext>.<tag>`, each base64url. */
const SEALED_PREFIX = '2.';
const IV_BYTES = 12;
/** GCM's full tag: Node would check as few bytes as the client sends (down to 4), a forgery in 2³² tries. */
const TAG_BYTES = 16;

/**
 * MRTR requestState, sealed with AES-256-GCM (authenticated encryption: the client can neither read nor
 * change it): carries the input responses gathered in earlier rounds, bound to the principal, the request
 * (method, name, arguments) and an expiry, so state that was tampered with, expired or is presented for
 * another principal or request is refused. Not single-use: within its expiry, the same principal may send
 * the same request with the same state again, which applies the same answers again (what answering again
 * would do); docs/security.md says so. States sealed by the version before (readable, HMAC-signed) are
 * still opened until they expire.
 */
export class RequestStateSealer {
  readonly #key: Buffer;
  readonly #cipherKey: Buffer;
  readonly #ttlMs: number;

  constructor(secret: string | Buffer, ttlMs = 10 * 60_000) {
    this.#key = createHash('sha256').update(secret).digest();
    this.#cipherKey = Buffer.from(hkdfSync('sha256', secret, '', 'durable-mcp-tasks requestState v2', 32));
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
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#cipherKey, iv, { authTagLength: TAG_BYTES });
    const sealed = Buffer.concat([cipher.update(JSON.stringify(payload), 'utf8'), cipher.final()]);
    const parts = [iv, sealed, cipher.getAuthTag()].map((b) => b.toString('base64url'));
    return `${SEALED_PREFIX}${parts.join('.')}`;
  }

  /** The responses carried by `state`; -32602 when it was tampered with, expired or is bound elsewhere. */
  open(state: string, binding: RequestStateBinding, now = Date.now()): InputResponses {
    const invalid = () => new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid requestState');
    const text = state.startsWith(SEALED_PREFIX) ? this.#decrypt(state) : this.#verified(state);
    if (text === undefined) throw invalid();
    let parsed: z.infer<typeof PayloadSchema>;
    try {
      parsed = PayloadSchema.parse(JSON.parse(text));
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

  /** A state of this version's payload, or undefined when it was not sealed with this key as it is. */
  #decrypt(state: string): string | undefined {
    const parts = state.slice(SEALED_PREFIX.length).split('.').map(decodeCanonicalBase64url);
    const [iv, sealed, tag] = parts;
    if (iv?.length !== IV_BYTES || sealed === undefined || tag?.length !== TAG_BYTES || parts.length !== 3)
      return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#cipherKey, iv, { authTagLength: TAG_BYTES });
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(sealed), decipher.final()]).toString('utf8');
    } catch {
      return undefined;
    }
  }

  /** The payload of a state sealed by the version before (`<body>.<HMAC>`), if its MAC holds. */
  #verified(state: string): string | undefined {
    const [body, mac, extra] = state.split('.');
    if (body === undefined || mac === undefined || extra !== undefined) return undefined;
    const expected = Buffer.from(this.#mac(body));
    const given = Buffer.from(mac);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return undefined;
    return decodeCanonicalBase64url(body)?.toString('utf8');
  }

  #mac(body: string): string {
    return createHmac('sha256', this.#key).update(body).digest('base64url');
  }
}
