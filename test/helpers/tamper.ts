// Tampered forms of a value the server handed out (a sealed state, a token, a cursor): what a client
// might send back instead of it, each of which the server must refuse as it refuses any value it never
// issued.

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/**
 * `value` with its last base64url character swapped for its neighbour (the lowest bit of its 6 flipped).
 * When the text's length leaves unused low bits in that character (length % 4 of 2 or 3), the swap
 * changes only those bits: Node's decoder gives the very same bytes.
 */
export function lastCharacterSwapped(value: string): string {
  const index = ALPHABET.indexOf(value.at(-1) ?? '');
  if (index < 0) throw new Error(`${value} does not end in a base64url character`);
  return `${value.slice(0, -1)}${ALPHABET[index ^ 1]}`;
}

/** Whether two base64url texts decode to the same bytes under Node's lenient decoder. */
export const sameBytes = (a: string, b: string) =>
  Buffer.from(a, 'base64url').equals(Buffer.from(b, 'base64url'));

/**
 * The tampered forms of `value`, by what was done to it: cut by 4 characters (3 bytes shorter, e.g. a
 * 13-byte GCM tag from a 16-byte one), cut by 1, and its last character swapped.
 */
export function tamperVariants(value: string): Record<string, string> {
  return {
    'cut by 4 characters': value.slice(0, -4),
    'cut by 1 character': value.slice(0, -1),
    'last character swapped': lastCharacterSwapped(value),
  };
}
