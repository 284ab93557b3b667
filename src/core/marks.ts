// Error classes a tool author throws (ProtocolError, NonRetryableError) may come from another copy of
// this package than the server's (a tools module that resolves src beside dist, or a second install):
// `instanceof` alone would not know them. Each carries a mark under a Symbol.for key, the same symbol
// in every copy, and its class answers `instanceof` by the mark too.

/**
 * Marks `cls` (a base class) so that `instanceof cls` also holds for an instance of the same class from
 * another copy of the package. Its subclasses keep the plain prototype check.
 */
export function markClass(cls: abstract new (...args: never[]) => unknown, name: string): void {
  const mark = Symbol.for(`durable-mcp-tasks.${name}`);
  Object.defineProperty(cls.prototype, mark, { value: true });
  Object.defineProperty(cls, Symbol.hasInstance, {
    value(this: unknown, value: unknown): boolean {
      if (Function.prototype[Symbol.hasInstance].call(this, value)) return true;
      return (
        this === cls &&
        typeof value === 'object' &&
        value !== null &&
        (value as Record<symbol, unknown>)[mark] === true
      );
    },
  });
}
