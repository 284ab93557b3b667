// `durable-mcp-tasks/client`: a client for any 2026-07-28 MCP server with the Tasks extension that keeps
// the ids of the tasks it creates, so that it can follow them again after a restart.
export { TaskEventsGoneError, type EventsOptions, type TaskEvent } from './events.ts';
export { McpAuthError, McpConnectionError, McpHttp, McpRpcError, type HttpOptions } from './http.ts';
export {
  defaultStateDir,
  FileTaskStore,
  MemoryTaskStore,
  type TaskIdStore,
  type TaskRecord,
  type TaskStore,
} from './store.ts';
export {
  snapshotOf,
  summarize,
  TasksClient,
  type CallToolOptions,
  type InputHandler,
  type InputRequest,
  type TaskSnapshot,
  type TasksClientOptions,
  type ToolOutcome,
  type WatchOptions,
} from './tasks-client.ts';
