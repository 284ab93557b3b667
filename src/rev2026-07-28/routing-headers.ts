import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import { META_PROTOCOL_VERSION, type JsonObject, type RequestMeta } from '../core/wire.ts';

const SENTINEL = /^=\?base64\?(.*)\?=$/s;
// Canonical, padded Base64: anything else in a sentinel is a malformed header.
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
// Visible ASCII, space and tab (RFC 9110 field values).
const SAFE_VALUE = /^[\x20-\x7e\t]*$/;

/** Which body field `Mcp-Name` mirrors, per method. */
const NAME_SOURCE: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
  // SEP-2669 draft (experimental): Mcp-Name is the task id there too.
  'tasks/steer': 'taskId',
  'tasks/pause': 'taskId',
  'tasks/resume': 'taskId',
};

function mismatch(message: string): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.HeaderMismatch, `Header mismatch: ${message}`);
}

/** Decodes an `=?base64?…?=` sentinel value; plain values are returned as they are. */
export function decodeHeaderValue(value: string): string {
  const m = SENTINEL.exec(value);
  if (m === null) return value;
  if (!BASE64.test(m[1]!)) throw new Error('invalid Base64');
  const bytes = Buffer.from(m[1]!, 'base64');
  const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  return text;
}

type HeaderGetter = (name: string) => string | undefined;

function required(get: HeaderGetter, name: string): string {
  const value = get(name);
  if (value === undefined) throw mismatch(`required header ${name} is missing`);
  if (!SAFE_VALUE.test(value)) throw mismatch(`header ${name} contains invalid characters`);
  return value;
}

/**
 * Checks the Streamable HTTP request metadata headers against the body: `MCP-Protocol-Version`,
 * `Mcp-Method` and, where the method has one, `Mcp-Name`. Throws -32020 on any missing or unequal value.
 */
export function validateRoutingHeaders(
  get: HeaderGetter,
  method: string,
  params: JsonObject,
  meta: RequestMeta,
) {
  const version = required(get, 'mcp-protocol-version');
  if (version !== meta[META_PROTOCOL_VERSION]) {
    throw mismatch(
      `MCP-Protocol-Version header value '${version}' does not match body value '${meta[META_PROTOCOL_VERSION]}'`,
    );
  }
  const headerMethod = required(get, 'mcp-method');
  if (headerMethod !== method) {
    throw mismatch(`Mcp-Method header value '${headerMethod}' does not match body value '${method}'`);
  }
  const source = NAME_SOURCE[method];
  if (source === undefined) return;
  const raw = required(get, 'mcp-name');
  let name: string;
  try {
    name = decodeHeaderValue(raw);
  } catch {
    throw mismatch('Mcp-Name header is not valid Base64-encoded UTF-8');
  }
  const bodyValue = params[source];
  if (typeof bodyValue !== 'string' || name !== bodyValue) {
    throw mismatch(`Mcp-Name header value does not match body value of params.${source}`);
  }
}
