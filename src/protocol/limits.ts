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
