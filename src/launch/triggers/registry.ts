import type { ToolDefinition } from '../../tools/define.ts';
import type { TriggerDefinition } from './define.ts';

/**
 * The server's triggers by name, checked against the tools it serves: a trigger of a tool it does not
 * serve, or two triggers of one name, is one clear error when the server is built, not a 404 later.
 */
export class TriggerRegistry {
  readonly #triggers = new Map<string, TriggerDefinition>();

  constructor(triggers: readonly TriggerDefinition[], tools: readonly ToolDefinition[]) {
    for (const trigger of triggers) {
      if (this.#triggers.has(trigger.name)) throw new Error(`Trigger ${trigger.name} is defined twice`);
      const tool = tools.find((t) => t.name === trigger.tool);
      if (tool === undefined) {
        throw new Error(`Trigger ${trigger.name}: no tool named ${trigger.tool} is served`);
      }
      // A prepare phase runs before the task exists, with the calling client (its input requests).
      if (tool.prepare !== undefined) {
        throw new Error(
          `Trigger ${trigger.name}: tool ${trigger.tool} has a prepare phase, which needs a client; a trigger has none`,
        );
      }
      this.#triggers.set(trigger.name, trigger);
    }
  }

  get(name: string): TriggerDefinition | undefined {
    return this.#triggers.get(name);
  }

  get size(): number {
    return this.#triggers.size;
  }
}
