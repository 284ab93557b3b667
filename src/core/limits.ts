import { ProtocolError, ProtocolErrorCode } from './errors.ts';

/** The UTF-8 size of a value's JSON. */
export function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
}

/** -32602 with a clear message when `value` is larger than `maxBytes` as JSON. */
export function assertSize(what: string, value: unknown, maxBytes: number): void {
  const size = jsonBytes(value);
  if (size > maxBytes) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `Invalid params: ${what} is ${size} bytes, over the limit of ${maxBytes}`,
    );
  }
}

// NUL, and UTF-16 surrogates without their pair: valid in JavaScript strings and JSON text, but Postgres
// refuses them in jsonb and text.
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether every string (and key) in `value` can be stored in Postgres. */
export function isStorable(value: unknown): boolean {
  if (typeof value === 'string') return !UNSTORABLE.test(value);
  if (Array.isArray(value)) return value.every(isStorable);
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).every(([k, v]) => !UNSTORABLE.test(k) && isStorable(v));
  }
  return true;
}

/** -32602 for a value that must be stored but holds NUL characters or unpaired surrogates. */
export function assertStorable(what: string, value: unknown): void {
  if (!isStorable(value)) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `Invalid params: ${what} contains NUL characters or unpaired UTF-16 surrogates, which cannot be stored`,
    );
  }
}
