import { timingSafeEqual } from 'node:crypto';

/** Compares a presented secret with the configured one in constant time (for equal lengths). */
export function sameSecret(given: string | undefined, expected: string): boolean {
  if (given === undefined) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The token of an `Authorization: Bearer <token>` header, if that is what it holds. */
export function bearerToken(authorization: string | undefined): string | undefined {
  return /^Bearer (.+)$/i.exec(authorization ?? '')?.[1];
}
