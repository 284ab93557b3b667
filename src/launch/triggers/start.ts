import { coerceError } from '../../log.ts';
import { ProtocolError } from '../../core/errors.ts';
import type { TaskService } from '../../tasks/service.ts';
import { triggerIdempotency } from '../../tasks/store/idempotency.ts';
import type { TaskView } from '../../tasks/store/view.ts';
import type { ToolRegistry } from '../../tools/registry.ts';
import {
  assertStorableArguments,
  InvalidToolArgumentsError,
  parseToolArguments,
  toolTaskOf,
  type TaskDefaults,
} from '../tool-task.ts';
import type { TriggerDefinition } from './define.ts';

/** A verified delivery that cannot start its task: what the trigger made of it was refused. One line. */
export class TriggerDeliveryError extends Error {
  constructor(
    readonly triggerName: string,
    message: string,
  ) {
    super(message);
    this.name = 'TriggerDeliveryError';
  }
}

export interface TriggerStartDeps {
  tasks: TaskService;
  tools: ToolRegistry;
  defaults: TaskDefaults;
  /** MAX_ARGUMENTS_BYTES: a trigger's arguments are held to a client's limit. */
  maxArgumentsBytes: number;
}

const MAX_KEY_LENGTH = 255;
/** zod's issues one per line (`✖ … → at path`), as one line: a sender's log shows one line per answer. */
const oneLine = (text: string) =>
  text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .join(' ');

/** Runs a trigger's own function on the delivery; what it throws is the delivery's fault. */
function mapped<T>(trigger: TriggerDefinition, what: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw new TriggerDeliveryError(trigger.name, `${what} failed: ${coerceError(err).message}`);
  }
}

/**
 * Starts the task of a verified delivery, exactly as a client's `tools/call` would build it (the tool's
 * schema, storable arguments, its TTL and concurrency key), owned by the trigger's principal and keyed by
 * the delivery's idempotency key: a redelivery returns the task of the first, on any instance.
 */
export async function startTriggeredTask(
  deps: TriggerStartDeps,
  trigger: TriggerDefinition,
  body: unknown,
  headers: Headers,
): Promise<TaskView> {
  const tool = deps.tools.get(trigger.tool);
  const rawArgs = mapped(trigger, 'arguments', () => trigger.arguments(body, headers));
  if (typeof rawArgs !== 'object' || rawArgs === null || Array.isArray(rawArgs)) {
    throw new TriggerDeliveryError(trigger.name, 'arguments did not return an object');
  }
  const key = mapped(trigger, 'idempotencyKey', () => trigger.idempotencyKey(body, headers));
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH) {
    throw new TriggerDeliveryError(
      trigger.name,
      `idempotencyKey must return a string of 1 to ${MAX_KEY_LENGTH} characters`,
    );
  }
  let parsedArgs: unknown;
  try {
    parsedArgs = parseToolArguments(tool, rawArgs);
    assertStorableArguments(rawArgs, {}, deps.maxArgumentsBytes);
  } catch (err) {
    if (err instanceof InvalidToolArgumentsError || err instanceof ProtocolError) {
      throw new TriggerDeliveryError(trigger.name, oneLine(err.message));
    }
    throw err;
  }
  return deps.tasks.create(
    toolTaskOf(tool, rawArgs, {
      principal: trigger.principal,
      defaults: deps.defaults,
      parsedArgs,
      idempotency: triggerIdempotency(key, trigger.name, tool.name, rawArgs),
    }),
  );
}
