// A tools module for real processes (`worker --tools test/helpers/schedule-tools.ts`) that declares a
// schedule: a quick tool called every second by every process that loads it, each tick once.
import { z } from 'zod';
import { defineSchedule, defineTool } from '../../src/index.ts';

export const tick = defineTool({
  name: 'tick',
  description: 'returns at once (test tool)',
  inputSchema: z.object({ label: z.string() }),
  taskSupport: 'required',
  handler: ({ label }) => ({ content: [{ type: 'text', text: label }] }),
});

export const EACH_SECOND = {
  name: 'each-second',
  tool: 'tick',
  arguments: { label: 'beat' },
  principal: 'ops',
};

export const tools = [tick];
export const schedules = [
  defineSchedule({
    ...EACH_SECOND,
    cron: '* * * * * *',
    tool: tick,
    overlap: 'allow',
    catchUp: { max: 100 },
  }),
];
