import type { TaskService } from '../tasks/service.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import type { RequestStateSealer } from '../tools/request-state.ts';
import type { Implementation } from './wire.ts';

/** What the protocol methods need, built once by the composition root. */
export interface ServerDeps {
  serverInfo: Implementation;
  tools: ToolRegistry;
  tasks: TaskService;
  requestState: RequestStateSealer;
  taskDefaults: { ttlMs: number | null; pollIntervalMs: number };
  /** Caching hint for server/discover and tools/list. */
  listTtlMs: number;
}
