import { randomBytes } from 'node:crypto';

/**
 * 144 bits from the CSPRNG, base64url: unguessable, and safe in an Mcp-Name header as it is. An id
 * never starts with `-`, so a shell command line (`durable-mcp-tasks tasks show <id>`) cannot read
 * it as an option; redrawing the 1 in 64 that would costs a fraction of a bit.
 */
export function newTaskId(): string {
  for (;;) {
    const id = randomBytes(18).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}
