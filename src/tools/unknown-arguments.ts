// Which argument names a tool takes. zod's `z.object` drops keys it does not know without a word, so a
// misspelled argument (`mib` for `megabytes`) became a silent default; a call naming an argument its tool
// does not take is refused instead, unless the tool's schema says it takes others (`.loose()`,
// `z.looseObject`, `.catchall()`). Read from zod's definitions (`_zod.def`), not with `instanceof`, so a
// tools module with its own copy of zod is read the same.
import type { z } from 'zod';

/** The object schema a tool's arguments are parsed with first (through `.transform()`, `z.preprocess`). */
function objectAtTop(schema: z.core.$ZodType): z.core.$ZodObjectDef | undefined {
  const def = schema._zod.def;
  if (def.type === 'object') return def as z.core.$ZodObjectDef;
  if (def.type !== 'pipe') return undefined;
  const { in: first, out } = def as z.core.$ZodPipeDef;
  return objectAtTop(first._zod.def.type === 'transform' ? out : first);
}

/**
 * The argument names a tool takes when it takes no others: those of its object schema, unless that
 * schema takes other keys (loose, or a catchall other than `z.never()`). Undefined when it takes any,
 * or when its schema is not an object (a union, an intersection), whose keys are left to zod.
 */
export function closedArgumentNames(schema: z.core.$ZodType): readonly string[] | undefined {
  const object = objectAtTop(schema);
  if (object === undefined) return undefined;
  if (object.catchall !== undefined && object.catchall._zod.def.type !== 'never') return undefined;
  return Object.keys(object.shape);
}

/** A list of names as a message reads it: `"a"`, `"a", "b"`. */
const quoted = (names: readonly string[]) => names.map((n) => JSON.stringify(n)).join(', ');

/**
 * Why a call of `toolName` with `args` is refused for naming arguments the tool does not take (in the
 * words of every invalid-arguments error: `Invalid arguments for tool …: …`, with the names it takes),
 * or undefined when it names none.
 */
export function unknownArgumentsMessage(
  toolName: string,
  schema: z.core.$ZodType,
  args: Record<string, unknown>,
): string | undefined {
  const known = closedArgumentNames(schema);
  if (known === undefined) return undefined;
  const unknown = Object.keys(args).filter((name) => !known.includes(name));
  if (unknown.length === 0) return undefined;
  const takes = known.length === 0 ? 'it takes none' : `it takes ${quoted(known)}`;
  const what = unknown.length === 1 ? 'unknown argument' : 'unknown arguments';
  return `Invalid arguments for tool ${toolName}: ${what} ${quoted(unknown)} (${takes})`;
}
