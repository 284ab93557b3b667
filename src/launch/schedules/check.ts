import { coerceError } from '../../log.ts';
import type { ToolRegistry } from '../../tools/registry.ts';
import { assertStorableArguments, parseToolArguments } from '../tool-task.ts';
import { InvalidScheduleError, type ScheduleDefinition } from './define.ts';

/**
 * Refuses, with one line naming the schedule, a schedule its server cannot fire: a name given twice, a
 * tool it does not serve, a tool with a `prepare` phase (which asks a client, and a clock has none), or
 * arguments the tool refuses or that cannot be stored.
 */
export function checkSchedules(
  schedules: readonly ScheduleDefinition[],
  tools: ToolRegistry,
  maxArgumentsBytes: number,
): void {
  const seen = new Set<string>();
  for (const s of schedules) {
    if (seen.has(s.name)) throw new InvalidScheduleError(s.name, 'defined twice');
    seen.add(s.name);
    checkSchedule(s, tools, maxArgumentsBytes);
  }
}

/** One schedule's tool and arguments, as checkSchedules checks them. */
export function checkSchedule(s: ScheduleDefinition, tools: ToolRegistry, maxArgumentsBytes: number): void {
  if (!tools.has(s.tool)) throw new InvalidScheduleError(s.name, `unknown tool "${s.tool}"`);
  const tool = tools.get(s.tool);
  if (tool.prepare !== undefined) {
    throw new InvalidScheduleError(s.name, `tool "${s.tool}" has a prepare phase, which needs a client`);
  }
  try {
    parseToolArguments(tool, s.arguments);
    assertStorableArguments(s.arguments, {}, maxArgumentsBytes);
  } catch (err) {
    throw new InvalidScheduleError(s.name, coerceError(err).message.replaceAll('\n', ' '));
  }
}
