/**
 * durable-mcp-tasks: a durable MCP server for the `io.modelcontextprotocol/tasks` extension on Postgres.
 * Everything a tool author and an embedding application use; nothing else is public.
 */
export { createServer, fromEnv } from './server.ts';
export type { DurableMcpServer, ServerOptions, ServerRole, Settings } from './server.ts';

export { defineTool } from './tools/define.ts';
export type {
  ConcurrencyLimit,
  ElicitParams,
  LogLevel,
  PrepareContext,
  SignalHandle,
  SignalResult,
  TaskSupport,
  ToolContext,
  ToolDefinition,
} from './tools/define.ts';
export type { Steering, SteeringMessage, SteeringWaitOptions } from './tools/steering.ts';
export { NonRetryableError, StepFailedError, StepTimeoutError } from './tools/retry.ts';
export { ChildTaskFailedError } from './tools/children.ts';
export type { ChildFailureStatus, ChildHandle, ChildOptions, FirstChild } from './tools/children.ts';
export type { MapItemInfo, MapOptions, RetryPolicy, StepInfo, StepOptions } from './tools/retry.ts';
export type { ArtifactLink, ArtifactOptions, ArtifactSource } from './core/artifacts.ts';
export { defineResource, defineResourceTemplate } from './resources/define.ts';
export type {
  ResourceContents,
  ResourceContext,
  ResourceDefinition,
  ResourceTemplateDefinition,
} from './resources/define.ts';
export { defineSchedule, InvalidScheduleError } from './launch/schedules/define.ts';
export type { CatchUp, Overlap, ScheduleDefinition, ScheduleOptions } from './launch/schedules/define.ts';
export { defineTrigger } from './launch/triggers/define.ts';
export type { TriggerDefinition } from './launch/triggers/define.ts';
export { bearer, hmacSha256, stripeSignature } from './launch/triggers/verify.ts';
export type {
  HmacSha256Options,
  StripeSignatureOptions,
  TriggerRequest,
  TriggerSecret,
  TriggerVerifier,
  TriggerVerification,
} from './launch/triggers/verify.ts';
export { definePrompt } from './prompts/define.ts';
export type { GetPromptResult, PromptDefinition, PromptMessage } from './prompts/define.ts';

export { missingCapability, ProtocolError, ProtocolErrorCode } from './core/errors.ts';
export type {
  CallToolResult,
  ClientCapabilities,
  ContentBlock,
  ElicitResult,
  ElicitValue,
  InputRequests,
  JsonObject,
} from './core/wire.ts';
export type { Logger } from './log.ts';
export type { SignalDelivery } from './core/signal-delivery.ts';
export { SHIPPED_TOOLS as EXAMPLE_TOOLS } from './tools/shipped/index.ts';
