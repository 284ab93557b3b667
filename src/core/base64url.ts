// Reading back a base64url value this server handed out. Node's decoder is lenient: it skips characters
// outside the alphabet, takes `+` and `/` and padding, and ignores the unused low bits of the last
// character, so many strings decode to the same bytes. A value read back must be exactly what was sent.

/**
 * The bytes `text` encodes when it is exactly what `Buffer#toString('base64url')` writes for them
 * (unpadded, the URL-safe alphabet only, unused bits zero); undefined for any other text.
 */
export function decodeCanonicalBase64url(text: string): Buffer | undefined {
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : undefined;
}
