import type { z } from 'zod';
import type { ContentBlock, JsonObject } from '../core/wire.ts';
import type { PrepareContext } from '../tools/define.ts';

export interface PromptMessage {
  role: 'user' | 'assistant';
  content: ContentBlock;
}

export interface GetPromptResult {
  description?: string;
  messages: PromptMessage[];
  _meta?: JsonObject;
}

/** A prompt: its arguments (a zod object of strings), and how to render it. */
export interface PromptDefinition<S extends z.ZodObject = z.ZodObject> {
  name: string;
  title?: string;
  description: string;
  /** Arguments; each key becomes a prompt argument, required unless optional in the schema. */
  argsSchema?: S;
  /** Renders the prompt; input (elicitation…) goes through MRTR as for synchronous tool calls. */
  get: (args: z.output<S>, ctx: PrepareContext) => Promise<GetPromptResult> | GetPromptResult;
  /** Completion of argument values for `completion/complete`. */
  complete?: Record<string, (value: string, context: Record<string, string>) => string[] | Promise<string[]>>;
}

export function definePrompt<S extends z.ZodObject>(def: PromptDefinition<S>): PromptDefinition<S> {
  return def;
}
