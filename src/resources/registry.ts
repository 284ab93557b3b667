import type { ResourceDefinition, ResourceTemplateDefinition } from './define.ts';

/** Compiles `a://x/{id}/y` into a matcher for its variables (each matches one path segment). */
function compileTemplate(template: string): (uri: string) => Record<string, string> | undefined {
  const names: string[] = [];
  const pattern = template
    .split(/(\{[A-Za-z0-9_]+\})/)
    .map((part) => {
      const m = /^\{([A-Za-z0-9_]+)\}$/.exec(part);
      if (m === null) return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      names.push(m[1]!);
      return '([^/?#]+)';
    })
    .join('');
  const re = new RegExp(`^${pattern}$`);
  return (uri) => {
    const m = re.exec(uri);
    if (m === null) return undefined;
    try {
      return Object.fromEntries(names.map((n, i) => [n, decodeURIComponent(m[i + 1]!)]));
    } catch {
      return undefined; // malformed percent-encoding: no such resource
    }
  };
}

export type ResolvedResource =
  | { kind: 'resource'; resource: ResourceDefinition }
  | { kind: 'template'; template: ResourceTemplateDefinition; variables: Record<string, string> };

/** Resources and resource templates, listed in registration order. */
export class ResourceRegistry {
  readonly #resources = new Map<string, ResourceDefinition>();
  readonly #templates: Array<{ def: ResourceTemplateDefinition; match: ReturnType<typeof compileTemplate> }> =
    [];

  constructor(
    resources: readonly ResourceDefinition[] = [],
    templates: readonly ResourceTemplateDefinition[] = [],
  ) {
    for (const r of resources) this.#resources.set(r.uri, r);
    for (const t of templates) this.#templates.push({ def: t, match: compileTemplate(t.uriTemplate) });
  }

  get empty(): boolean {
    return this.#resources.size === 0 && this.#templates.length === 0;
  }

  resources(): ResourceDefinition[] {
    return [...this.#resources.values()];
  }

  templates(): ResourceTemplateDefinition[] {
    return this.#templates.map((t) => t.def);
  }

  template(uriTemplate: string): ResourceTemplateDefinition | undefined {
    return this.#templates.find((t) => t.def.uriTemplate === uriTemplate)?.def;
  }

  resolve(uri: string): ResolvedResource | undefined {
    const resource = this.#resources.get(uri);
    if (resource !== undefined) return { kind: 'resource', resource };
    for (const t of this.#templates) {
      const variables = t.match(uri);
      if (variables !== undefined) return { kind: 'template', template: t.def, variables };
    }
    return undefined;
  }
}
