// Artifacts' names on the wire: the resource URI a task's artifact is read by, its download path, and the
// `resource_link` content item that points at it. One home, shared by the worker that writes an artifact,
// the protocol method that reads it and the HTTP route that streams it.
import type { JsonObject } from './wire.ts';

/** The resource template of every task's artifacts (listed by `resources/templates/list`). */
export const ARTIFACT_URI_TEMPLATE = 'tasks://{taskId}/artifacts/{name}';

/** The `_meta` key of a link's HTTP download URL. */
export const DOWNLOAD_URL_META = 'dev.durable-mcp-tasks/downloadUrl';
/** The `_meta` key of a link's hex SHA-256 (of the whole artifact). */
export const SHA256_META = 'dev.durable-mcp-tasks/sha256';

/** Bytes per stored chunk: a writer holds at most two, a reader one. */
export const ARTIFACT_CHUNK_BYTES = 1_048_576;

/** The artifact a result too large to store inline moves to (a name tools may not use themselves). */
export const SPILLED_RESULT_NAME = 'tool-result.json';

/** An artifact name's longest form, in UTF-8 bytes. */
const MAX_NAME_BYTES = 255;

/** The artifact's resource URI: `tasks://{taskId}/artifacts/{name}`, its parts percent-encoded. */
export const artifactUri = (taskId: string, name: string): string =>
  `tasks://${encodeURIComponent(taskId)}/artifacts/${encodeURIComponent(name)}`;

/** The download path under the MCP endpoint's path: `/mcp/artifacts/{taskId}/{name}`. */
export const artifactPath = (mcpPath: string, taskId: string, name: string): string =>
  `${mcpPath}/artifacts/${encodeURIComponent(taskId)}/${encodeURIComponent(name)}`;

/** Why `name` cannot name an artifact, or undefined when it can. */
export function artifactNameProblem(name: unknown): string | undefined {
  if (typeof name !== 'string' || name === '') return 'an artifact name must be a non-empty string';
  if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES)
    return `an artifact name is at most ${MAX_NAME_BYTES} bytes`;
  if (name === '.' || name === '..' || name.includes('/'))
    return 'an artifact name may not be "." or ".." or hold "/"';
  // (Control characters, and unpaired surrogates, which Postgres cannot store.)
  if (
    /[\u0000-\u001f\u007f]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(name)
  ) {
    return 'an artifact name may not hold control characters or unpaired surrogates';
  }
  return undefined;
}

/** A `resource_link` content item to an artifact, as a tool puts it in its result. */
export interface ArtifactLink extends JsonObject {
  type: 'resource_link';
  uri: string;
  name: string;
  mimeType: string;
  size: number;
  _meta: { [DOWNLOAD_URL_META]: string; [SHA256_META]: string };
}

export function artifactLink(a: {
  uri: string;
  name: string;
  mimeType: string;
  size: number;
  downloadUrl: string;
  sha256: string;
}): ArtifactLink {
  return {
    type: 'resource_link',
    uri: a.uri,
    name: a.name,
    mimeType: a.mimeType,
    size: a.size,
    _meta: { [DOWNLOAD_URL_META]: a.downloadUrl, [SHA256_META]: a.sha256 },
  };
}

/** Whether bytes of this media type are text (`resources/read` answers `text`, not a base64 `blob`). */
export function isTextMimeType(mimeType: string): boolean {
  const type = mimeType.split(';')[0]!.trim().toLowerCase();
  return (
    type.startsWith('text/') ||
    type === 'application/json' ||
    type.endsWith('+json') ||
    type === 'application/xml' ||
    type.endsWith('+xml') ||
    type === 'application/x-ndjson' ||
    type === 'application/yaml'
  );
}

/**
 * What `ctx.artifact` writes: a string (UTF-8), bytes, or an iterable of them, such as a Node readable
 * stream or a web ReadableStream, consumed as it is produced.
 */
export type ArtifactSource =
  string | Uint8Array | AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>;

export interface ArtifactOptions {
  /** Default: `text/plain; charset=utf-8` for a string, else `application/octet-stream`. */
  mimeType?: string;
}
