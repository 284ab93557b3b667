import { z } from 'zod';
import { ToolNotFoundError } from './errors.ts';
import type { JsonObject } from '../core/wire.ts';
import type { ToolDefinition } from './define.ts';
import { closedArgumentNames } from './unknown-arguments.ts';

/** The tool as `tools/list` describes it. */
export interface ToolDescription {
  name: string;
  title?: string;
  description: string;
  inputSchema: JsonObject;
  annotations?: JsonObject;
}

/** Tools by name, listed in registration order (deterministic, as tools/list requires). */
export class ToolRegistry {
  readonly #tools = new Map<string, ToolDefinition>();
  #descriptions: ToolDescription[] | undefined;

  constructor(tools: readonly ToolDefinition[] = []) {
    for (const tool of tools) this.register(tool);
  }

  register(tool: ToolDefinition): this {
    if (this.#tools.has(tool.name)) throw new Error(`Tool ${tool.name} is registered twice`);
    assertFlowControl(tool);
    this.#tools.set(tool.name, tool);
    this.#descriptions = undefined;
    return this;
  }

  get(name: string): ToolDefinition {
    const tool = this.#tools.get(name);
    if (tool === undefined) throw new ToolNotFoundError(name);
    return tool;
  }

  has(name: string): boolean {
    return this.#tools.has(name);
  }

  describe(name: string): ToolDescription {
    const description = this.list().find((t) => t.name === name);
    if (description === undefined) throw new ToolNotFoundError(name);
    return description;
  }

  /** Wire descriptions, derived once from the zod schemas. */
  list(): readonly ToolDescription[] {
    this.#descriptions ??= [...this.#tools.values()].map(describeTool);
    return this.#descriptions;
  }
}

export function describeTool(tool: ToolDefinition): ToolDescription {
  return {
    name: tool.name,
    ...(tool.title === undefined ? {} : { title: tool.title }),
    description: tool.description,
    inputSchema: tool.inputJsonSchema ?? toInputSchema(tool.inputSchema),
    ...(tool.annotations === undefined ? {} : { annotations: tool.annotations }),
  };
}

/**
 * JSON Schema 2020-12 for a tool's input, as the client will validate it. A tool that takes no arguments
 * but its own says so with `additionalProperties: false` (zod writes it for a strict object only, though
 * tools/call refuses others for a plain `z.object` too).
 */
export function toInputSchema(schema: z.ZodType): JsonObject {
  const json = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io: 'input',
    unrepresentable: 'any',
  }) as JsonObject;
  const closed = closedArgumentNames(schema) !== undefined;
  if (closed && json.type === 'object' && json.additionalProperties === undefined)
    json.additionalProperties = false;
  return json;
}

/** A tool's flow-control settings must be whole numbers ≥ 1 (ms: within a Postgres integer, for the window). */
function assertFlowControl(tool: ToolDefinition): void {
  const wholeAtLeastOne: [string, number | undefined, number][] = [
    ['concurrency.limit', tool.concurrency?.limit, Number.MAX_SAFE_INTEGER],
    ['rateLimit.limit', tool.rateLimit?.limit, 2_147_483_647],
    ['rateLimit.per', tool.rateLimit?.per, 2_147_483_647],
    ['debounce.ms', tool.debounce?.ms, 2_147_483_647],
    ['timeoutMs', tool.timeoutMs, Number.MAX_SAFE_INTEGER],
  ];
  for (const [name, value, max] of wholeAtLeastOne) {
    if (value !== undefined && !(Number.isInteger(value) && value >= 1 && value <= max)) {
      throw new Error(`Tool ${tool.name}: ${name} must be a whole number ≥ 1 (got ${value})`);
    }
  }
}
