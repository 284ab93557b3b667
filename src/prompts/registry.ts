import type { z } from 'zod';
import type { PromptDefinition } from './define.ts';

export interface PromptDescription {
  name: string;
  title?: string;
  description: string;
  arguments?: Array<{ name: string; description?: string; required?: boolean }>;
}

/** Prompts by name, listed in registration order. */
export class PromptRegistry {
  readonly #prompts = new Map<string, PromptDefinition>();

  constructor(prompts: readonly PromptDefinition[] = []) {
    for (const p of prompts) {
      if (this.#prompts.has(p.name)) throw new Error(`Prompt ${p.name} is registered twice`);
      this.#prompts.set(p.name, p);
    }
  }

  get empty(): boolean {
    return this.#prompts.size === 0;
  }

  get(name: string): PromptDefinition | undefined {
    return this.#prompts.get(name);
  }

  list(): PromptDescription[] {
    return [...this.#prompts.values()].map((p) => ({
      name: p.name,
      ...(p.title === undefined ? {} : { title: p.title }),
      description: p.description,
      ...(p.argsSchema === undefined ? {} : { arguments: describeArguments(p.argsSchema) }),
    }));
  }
}

function describeArguments(schema: z.ZodObject): PromptDescription['arguments'] {
  return Object.entries(schema.shape).map(([name, field]) => {
    const f = field as z.ZodType & { description?: string };
    return {
      name,
      ...(f.description === undefined ? {} : { description: f.description }),
      required: !f.safeParse(undefined).success,
    };
  });
}
