// The built-in resource template of tasks' artifacts: `resources/read` of `tasks://{taskId}/artifacts/{name}`
// returns a complete artifact of the caller's own task inline, up to ARTIFACT_READ_MAX_BYTES (text for
// text types, else a base64 blob); a larger one gets -32602 that names its HTTP download.
import { ARTIFACT_URI_TEMPLATE, DOWNLOAD_URL_META, isTextMimeType, SHA256_META } from '../core/artifacts.ts';
import type { Metrics } from '../core/metrics.ts';
import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import type { ResourceContents, ResourceTemplateDefinition } from '../resources/define.ts';
import type { ArtifactReader } from '../tasks/artifacts.ts';

export interface ArtifactResourceOptions {
  artifacts: ArtifactReader;
  /** ARTIFACT_READ_MAX_BYTES. */
  maxBytes: number;
  /** An artifact's HTTP download URL. */
  downloadUrl: (taskId: string, name: string) => string;
  metrics?: Metrics | undefined;
}

export function artifactResourceTemplate(opts: ArtifactResourceOptions): ResourceTemplateDefinition {
  return {
    uriTemplate: ARTIFACT_URI_TEMPLATE,
    name: 'task-artifact',
    title: "A task's artifact",
    description:
      `Large outputs of your tasks (exports, reports, results too large to store inline). Read here up to ` +
      `${opts.maxBytes} bytes; any size downloads over HTTP (GET, with Range) from the URL in the link's ` +
      `_meta["${DOWNLOAD_URL_META}"].`,
    async read(uri, { taskId, name }, ctx): Promise<ResourceContents[]> {
      const info =
        taskId === undefined || name === undefined
          ? undefined
          : await opts.artifacts.find(ctx.principal, taskId, name);
      // Another principal's artifact is answered exactly like an unknown resource.
      if (info === undefined) {
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Resource not found: ${uri}`, { uri });
      }
      const downloadUrl = opts.downloadUrl(info.taskId, info.name);
      if (info.size > opts.maxBytes) {
        throw new ProtocolError(
          ProtocolErrorCode.InvalidParams,
          `Artifact ${uri} is ${info.size} bytes, over the ${opts.maxBytes} bytes resources/read returns: download it with an HTTP GET of ${downloadUrl} (same authorization as the MCP endpoint; Range supported)`,
          { uri, size: info.size, downloadUrl },
        );
      }
      const parts: Buffer[] = [];
      for await (const part of opts.artifacts.bytes(info)) parts.push(part);
      const bytes = Buffer.concat(parts, info.size);
      opts.metrics?.artifactBytesRead.inc({ via: 'resources_read' }, info.size);
      const _meta = { [DOWNLOAD_URL_META]: downloadUrl, [SHA256_META]: info.sha256 };
      const text = isTextMimeType(info.mimeType) ? utf8(bytes) : undefined;
      return [
        text === undefined
          ? { uri, mimeType: info.mimeType, blob: bytes.toString('base64'), _meta }
          : { uri, mimeType: info.mimeType, text, _meta },
      ];
    },
  };
}

/** The bytes as text, or undefined when they are not valid UTF-8 (then they go as a blob). */
function utf8(bytes: Buffer): string | undefined {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}
