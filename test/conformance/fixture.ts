import type { ProcessOptions } from '../../src/process/start.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { EVERYTHING_TOOLS } from './everything-tools.ts';
import { PROMPTS, RESOURCE_TEMPLATES, RESOURCES } from './resources-prompts.ts';
import { SESSION_TOOLS } from './session-tools.ts';
import { TASKS_TOOLS } from './tasks-tools.ts';

/** The conformance fixture: the suite's tools, resources and prompts, beside the shipped tools. */
export const CONFORMANCE_FIXTURE: Pick<
  ProcessOptions,
  'tools' | 'resources' | 'resourceTemplates' | 'prompts'
> = {
  tools: [...EVERYTHING_TOOLS, ...SESSION_TOOLS, ...TASKS_TOOLS, ...SHIPPED_TOOLS],
  resources: RESOURCES,
  resourceTemplates: RESOURCE_TEMPLATES,
  prompts: PROMPTS,
};
