import { randomBytes } from 'node:crypto';

/** 144 bits from the CSPRNG, base64url: unguessable, and safe in an Mcp-Name header as it is. */
export function newTaskId(): string {
  return randomBytes(18).toString('base64url');
}
