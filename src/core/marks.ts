// Error classes a tool author throws (ProtocolError, NonRetryableError) may come from another copy of
// this package than the server's (a tools module that resolves src beside dist, or a second install):
// `instanceof` alone would not know them. Each carries a mark under a Symbol.for key, the same symbol
// in every copy, and its class answers `instanceof` by the mark too.

/** Whether `value` is an object carrying `mark` (on itself or its prototypes). */
export function isMarked(value: unknown, mark: symbol): boolean {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[mark] === true;
}

/**
 * `instanceof` for a marked base class: the plain prototype check, or, for the base class itself (not
 * its subclasses), the mark of another copy's instance.
 */
export function isInstanceOrMarked(
  cls: abstract new (...args: never[]) => unknown,
  base: unknown,
  value: unknown,
  mark: symbol,
): boolean {
  if (Function.prototype[Symbol.hasInstance].call(cls, value)) return true;
  return cls === base && isMarked(value, mark);
}
