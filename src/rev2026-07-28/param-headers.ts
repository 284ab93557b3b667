import { decodeHeaderValue } from './routing-headers.ts';
import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import type { JsonObject } from '../core/wire.ts';

interface HeaderParam {
  header: string;
  path: string[];
}

/** Properties annotated with `x-mcp-header`, reachable from the root through `properties` alone. */
export function headerParams(schema: JsonObject, path: string[] = []): HeaderParam[] {
  const out: HeaderParam[] = [];
  const properties = schema.properties as Record<string, JsonObject> | undefined;
  if (properties === undefined || typeof properties !== 'object') return out;
  for (const [key, sub] of Object.entries(properties)) {
    if (sub === null || typeof sub !== 'object') continue;
    const header = sub['x-mcp-header'];
    if (typeof header === 'string') out.push({ header, path: [...path, key] });
    out.push(...headerParams(sub, [...path, key]));
  }
  return out;
}

function at(value: unknown, path: string[]): unknown {
  let v = value;
  for (const key of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[key];
  }
  return v;
}

function mismatch(message: string): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.HeaderMismatch, `Header mismatch: ${message}`);
}

/**
 * Checks `Mcp-Param-{Name}` headers against the arguments they mirror (after Base64-sentinel decoding):
 * a value present in the body needs its header, equal to it (integers compared numerically).
 */
export function validateParamHeaders(
  inputSchema: JsonObject,
  args: JsonObject,
  header: (name: string) => string | undefined,
): void {
  for (const param of headerParams(inputSchema)) {
    const value = at(args, param.path);
    if (value === undefined || value === null) continue;
    const name = `Mcp-Param-${param.header}`;
    const raw = header(name);
    if (raw === undefined) throw mismatch(`required header ${name} is missing`);
    // Visible ASCII, space and tab only (RFC 9110); anything else must come Base64-encoded.
    if (!/^[\x20-\x7e\t]*$/.test(raw)) throw mismatch(`header ${name} contains invalid characters`);
    let decoded: string;
    try {
      decoded = decodeHeaderValue(raw);
    } catch {
      throw mismatch(`header ${name} is not valid Base64-encoded UTF-8`);
    }
    const equal =
      typeof value === 'number'
        ? /^-?\d+(\.0+)?$/.test(decoded) && Number(decoded) === value
        : (typeof value === 'string' || typeof value === 'boolean') && decoded === String(value);
    if (!equal) throw mismatch(`header ${name} does not match the body value at ${param.path.join('.')}`);
  }
}
