import { describeIssues, ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import { jsonDepth } from '../core/json-depth.ts';
import {
  JsonRpcMessageSchema,
  META_PROTOCOL_VERSION,
  RequestMetaSchema,
  type JsonRpcMessage,
  type RequestId,
  type RequestMeta,
} from '../core/wire.ts';
import { SUPPORTED_VERSIONS } from './version.ts';

/** A parsed body: a request to answer, a notification to accept, or an error to send back. */
export type Incoming =
  | { kind: 'request'; message: JsonRpcMessage & { id: RequestId } }
  | { kind: 'notification'; message: JsonRpcMessage }
  | { kind: 'error'; id: RequestId | null; error: ProtocolError };

/** Parses a POST body into one JSON-RPC message; batches, responses and too deep nesting are rejected. */
export function parseMessage(body: string, { maxDepth = 64 }: { maxDepth?: number } = {}): Incoming {
  if (jsonDepth(body) > maxDepth) {
    return {
      kind: 'error',
      id: null,
      error: new ProtocolError(
        ProtocolErrorCode.InvalidRequest,
        `Invalid Request: JSON nested deeper than ${maxDepth}`,
      ),
    };
  }
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return { kind: 'error', id: null, error: new ProtocolError(ProtocolErrorCode.ParseError, 'Parse error') };
  }
  if (Array.isArray(json)) {
    return {
      kind: 'error',
      id: null,
      error: new ProtocolError(
        ProtocolErrorCode.InvalidRequest,
        'Invalid Request: batches are not supported',
      ),
    };
  }
  const id = readId(json);
  const parsed = JsonRpcMessageSchema.safeParse(json);
  if (!parsed.success || (json as Record<string, unknown>).id === null) {
    const detail = parsed.success ? 'id must not be null' : describeIssues(parsed.error);
    return {
      kind: 'error',
      id,
      error: new ProtocolError(ProtocolErrorCode.InvalidRequest, `Invalid Request: ${detail}`),
    };
  }
  const message = parsed.data;
  if (message.id === undefined) return { kind: 'notification', message };
  return { kind: 'request', message: { ...message, id: message.id } };
}

function readId(json: unknown): RequestId | null {
  if (json === null || typeof json !== 'object') return null;
  const id = (json as Record<string, unknown>).id;
  return typeof id === 'string' || (typeof id === 'number' && Number.isInteger(id)) ? id : null;
}

/** Validates the required per-request `_meta` fields (-32602) and the protocol version (-32022). */
export function parseRequestMeta(params: Record<string, unknown> | undefined): RequestMeta {
  const parsed = RequestMetaSchema.safeParse(params?._meta);
  if (!parsed.success) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `Invalid params: _meta must carry ${META_PROTOCOL_VERSION} and io.modelcontextprotocol/clientCapabilities (${describeIssues(parsed.error)})`,
      undefined,
      400,
    );
  }
  return parsed.data;
}

export function assertSupportedVersion(meta: RequestMeta): void {
  const requested = meta[META_PROTOCOL_VERSION];
  if (!(SUPPORTED_VERSIONS as readonly string[]).includes(requested)) {
    throw new ProtocolError(ProtocolErrorCode.UnsupportedProtocolVersion, 'Unsupported protocol version', {
      supported: [...SUPPORTED_VERSIONS],
      requested,
    });
  }
}

/** The HTTP status that goes with a JSON-RPC error on Streamable HTTP. */
export function httpStatusFor(error: ProtocolError): 200 | 400 | 403 | 404 | 413 | 429 {
  if (error.httpStatus !== undefined) return error.httpStatus;
  switch (error.code as ProtocolErrorCode) {
    case ProtocolErrorCode.ParseError:
    case ProtocolErrorCode.InvalidRequest:
    case ProtocolErrorCode.HeaderMismatch:
    case ProtocolErrorCode.MissingRequiredClientCapability:
    case ProtocolErrorCode.UnsupportedProtocolVersion:
      return 400;
    case ProtocolErrorCode.MethodNotFound:
      return 404;
    default:
      return 200;
  }
}
