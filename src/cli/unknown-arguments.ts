// `call`'s arguments against the tool's input schema, before the call: a name the tool does not take
// (its schema says `additionalProperties: false`) is refused in one line, with the argument most likely
// meant, so that `--arg mib=2` is not silently dropped for the default.
import { isJsonObject } from '../core/wire.ts';

type Json = Record<string, unknown>;

/** Levenshtein distance, letter case ignored (`chunksize` is one edit from nothing of `chunkSize`). */
function editDistance(a: string, b: string): number {
  const [x, y] = [a.toLowerCase(), b.toLowerCase()];
  let previous = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const row = [i];
    for (let j = 1; j <= y.length; j++) {
      const substitution = previous[j - 1]! + (x[i - 1] === y[j - 1] ? 0 : 1);
      row.push(Math.min(previous[j]! + 1, row[j - 1]! + 1, substitution));
    }
    previous = row;
  }
  return previous[y.length]!;
}

/** Whether `word` is a whole word of the property's title or description (`mib` in "Size (MiB)"). */
function documents(property: unknown, word: string): boolean {
  if (!isJsonObject(property)) return false;
  const text = [property.title, property.description].filter((t) => typeof t === 'string').join(' ');
  return text
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .includes(word.toLowerCase());
}

/**
 * The argument `name` most likely stands for: the nearest by edit distance when at most a third of the
 * longer name differs, else the only one whose title or description has `name` as a word.
 */
function meantArgument(name: string, properties: Json): string | undefined {
  const known = Object.keys(properties);
  const ranked = known
    .map((k) => ({ k, d: editDistance(name, k) }))
    .filter(({ k, d }) => {
      const longer = Math.max(k.length, name.length);
      return d < longer && d <= Math.max(1, Math.floor(longer / 3));
    })
    .sort((a, b) => a.d - b.d);
  if (ranked[0] !== undefined) return ranked[0].k;
  const documented = known.filter((k) => documents(properties[k], name));
  return documented.length === 1 ? documented[0] : undefined;
}

/**
 * The one line that refuses the arguments of `args` the tool does not take, or undefined when it takes
 * them all (or its schema lets it take others): `unknown argument mib (did you mean megabytes?)`, and
 * the names it takes where no argument meant is clear.
 */
export function unknownArgumentsLine(tool: string, schema: Json, args: Json): string | undefined {
  if (schema.additionalProperties !== false) return undefined;
  const properties = isJsonObject(schema.properties) ? schema.properties : {};
  const unknown = Object.keys(args).filter((name) => !Object.hasOwn(properties, name));
  if (unknown.length === 0) return undefined;
  const meant = unknown.map((name) => ({ name, meant: meantArgument(name, properties) }));
  const named = meant.map((u) => (u.meant === undefined ? u.name : `${u.name} (did you mean ${u.meant}?)`));
  const known = Object.keys(properties);
  const takes = known.length === 0 ? 'no arguments' : known.join(', ');
  const list = meant.some((u) => u.meant === undefined) ? `; ${tool} takes ${takes}` : '';
  return `unknown argument${unknown.length === 1 ? '' : 's'} ${named.join(', ')}${list}`;
}
