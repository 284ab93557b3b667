import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/** What a trigger's verifier sees: the body exactly as it arrived (what senders sign) and the headers. */
export interface TriggerRequest {
  readonly rawBody: Uint8Array;
  readonly headers: Headers;
  /** Milliseconds since the epoch when the request arrived (for signatures with a timestamp). */
  readonly now: number;
}

/**
 * Whether the request comes from the trigger's sender. A refusal's `reason` is logged on the server,
 * never sent back (the sender gets 401 and nothing else).
 */
export type TriggerVerification =
  { readonly verified: true } | { readonly verified: false; readonly reason: string };

/** Checks a trigger's request before anything of it is parsed or stored. */
export type TriggerVerifier = (request: TriggerRequest) => TriggerVerification;

/**
 * A secret: the value itself, or `{ env: 'NAME' }` to read `process.env.NAME` at each request (so a
 * tools module needs no secret of its own, and a rotated one is used without reloading it).
 */
export type TriggerSecret = string | { readonly env: string };

const VERIFIED: TriggerVerification = Object.freeze({ verified: true });
const refused = (reason: string): TriggerVerification => ({ verified: false, reason });

/** The secret's value now, or a reason why there is none (an unset variable refuses every request). */
function secretOf(secret: TriggerSecret): { value: string } | { reason: string } {
  if (typeof secret === 'string') return { value: secret };
  const value = process.env[secret.env];
  return value === undefined || value === '' ? { reason: `${secret.env} is not set` } : { value };
}

function assertSecret(secret: TriggerSecret, what: string): void {
  const ok =
    typeof secret === 'string' ? secret !== '' : typeof secret?.env === 'string' && secret.env !== '';
  if (!ok) throw new Error(`${what}: secret must be a non-empty string or { env: 'NAME' }`);
}

/** Equal in constant time (digests first: timingSafeEqual needs equal lengths, and a length must not leak). */
function sameText(a: string, b: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(a), digest(b));
}

const hmacHex = (key: string, ...parts: (string | Uint8Array)[]) => {
  const hmac = createHmac('sha256', key);
  for (const part of parts) hmac.update(part);
  return hmac.digest('hex');
};

export interface HmacSha256Options {
  secret: TriggerSecret;
  /** The header holding the signature, e.g. `X-Hub-Signature-256` (GitHub). */
  header: string;
  /** What precedes the hex digest in the header, e.g. `sha256=` (GitHub). Default none. */
  prefix?: string;
}

/**
 * An HMAC-SHA256 of the raw body in a header, as hex (GitHub: `hmacSha256({ secret, header:
 * 'X-Hub-Signature-256', prefix: 'sha256=' })`). Compared in constant time.
 */
export function hmacSha256({ secret, header, prefix = '' }: HmacSha256Options): TriggerVerifier {
  assertSecret(secret, 'hmacSha256');
  return ({ rawBody, headers }) => {
    const key = secretOf(secret);
    if ('reason' in key) return refused(key.reason);
    const signature = headers.get(header);
    if (signature === null) return refused(`no ${header} header`);
    if (!signature.startsWith(prefix)) return refused(`${header} does not start with ${prefix}`);
    const expected = hmacHex(key.value, rawBody);
    return sameText(signature.slice(prefix.length).toLowerCase(), expected)
      ? VERIFIED
      : refused(`${header} does not match the body`);
  };
}

export interface StripeSignatureOptions {
  /** The endpoint's signing secret (`whsec_…`). */
  secret: TriggerSecret;
  /** Largest age (and clock skew) of the signed timestamp accepted, in seconds. Default 300, as Stripe's libraries. */
  toleranceSeconds?: number;
  /** Default `Stripe-Signature`. */
  header?: string;
}

/**
 * Stripe's scheme: `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=…]`, each `v1` an HMAC-SHA256 of
 * `${t}.${rawBody}`; a timestamp further than the tolerance from now is refused (a replayed request).
 */
export function stripeSignature({
  secret,
  toleranceSeconds = 300,
  header = 'Stripe-Signature',
}: StripeSignatureOptions): TriggerVerifier {
  assertSecret(secret, 'stripeSignature');
  return ({ rawBody, headers, now }) => {
    const key = secretOf(secret);
    if ('reason' in key) return refused(key.reason);
    const value = headers.get(header);
    if (value === null) return refused(`no ${header} header`);
    const pairs = value.split(',').map((part) => {
      const at = part.indexOf('=');
      return at < 0 ? ['', ''] : [part.slice(0, at).trim(), part.slice(at + 1).trim()];
    });
    const t = pairs.find(([k]) => k === 't')?.[1];
    const signatures = pairs.filter(([k]) => k === 'v1').map(([, v]) => v ?? '');
    if (t === undefined || !/^\d{1,12}$/.test(t) || signatures.length === 0) {
      return refused(`${header} has no t=… and v1=…`);
    }
    if (Math.abs(now / 1000 - Number(t)) > toleranceSeconds) {
      return refused(`${header}'s timestamp is outside the tolerance of ${toleranceSeconds} s`);
    }
    const expected = hmacHex(key.value, `${t}.`, rawBody);
    // Every v1 is compared (a secret being rolled signs with both): no early exit on a match.
    const matches = signatures.map((s) => sameText(s.toLowerCase(), expected));
    return matches.includes(true) ? VERIFIED : refused(`no v1 of ${header} matches the body`);
  };
}

/** `Authorization: Bearer <secret>`, compared in constant time: for senders that sign nothing. */
export function bearer(secret: TriggerSecret): TriggerVerifier {
  assertSecret(secret, 'bearer');
  return ({ headers }) => {
    const key = secretOf(secret);
    if ('reason' in key) return refused(key.reason);
    const authorization = headers.get('authorization');
    const token = authorization === null ? undefined : /^Bearer (.+)$/i.exec(authorization)?.[1];
    if (token === undefined) return refused('no bearer token');
    return sameText(token, key.value) ? VERIFIED : refused('the bearer token does not match');
  };
}
