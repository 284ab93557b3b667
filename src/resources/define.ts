import type { JsonObject } from '../core/wire.ts';
import type { PrepareContext } from '../tools/define.ts';

/** One item of `resources/read`'s `contents`: text or base64 `blob`. */
export type ResourceContents =
  | { uri: string; mimeType?: string; text: string; _meta?: JsonObject }
  | { uri: string; mimeType?: string; blob: string; _meta?: JsonObject };

/** What a resource reader sees: synchronous, input through MRTR, like a synchronous tool call. */
export type ResourceContext = PrepareContext;

/** A resource with a fixed URI. */
export interface ResourceDefinition {
  uri: string;
  name: string;
  title?: string;
  description?: string;
  mimeType?: string;
  read: (uri: string, ctx: ResourceContext) => Promise<ResourceContents[]> | ResourceContents[];
}

/** Resources addressed by an RFC 6570 level-1 template such as `test://template/{id}/data`. */
export interface ResourceTemplateDefinition {
  uriTemplate: string;
  name: string;
  title?: string;
  description?: string;
  mimeType?: string;
  read: (
    uri: string,
    variables: Record<string, string>,
    ctx: ResourceContext,
  ) => Promise<ResourceContents[]> | ResourceContents[];
  /** Completion of template variables for `completion/complete`. */
  complete?: Record<string, (value: string) => string[] | Promise<string[]>>;
}

export function defineResource(def: ResourceDefinition): ResourceDefinition {
  return def;
}

export function defineResourceTemplate(def: ResourceTemplateDefinition): ResourceTemplateDefinition {
  return def;
}
