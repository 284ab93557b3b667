import { z } from 'zod';

/** The MCP endpoint's path (the artifacts' downloads are under it). */
export const MCP_PATH = '/mcp';

export const META_PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';
export const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
export const META_CLIENT_INFO = 'io.modelcontextprotocol/clientInfo';
export const META_LOG_LEVEL = 'io.modelcontextprotocol/logLevel';
export const META_SERVER_INFO = 'io.modelcontextprotocol/serverInfo';
export const META_SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
/** This server's own: a `tools/call` retried with the same key returns the task the first call created. */
export const META_IDEMPOTENCY_KEY = 'dev.durable-mcp-tasks/idempotencyKey';

export const JsonObjectSchema = z.record(z.string(), z.unknown());
export type JsonObject = z.infer<typeof JsonObjectSchema>;

/** Whether `v` is a JSON object (not null, not an array): a field of a parsed message, checked before it is read. */
export const isJsonObject = (v: unknown): v is JsonObject =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

export const RequestIdSchema = z.union([z.string(), z.number().int()]);
export type RequestId = z.infer<typeof RequestIdSchema>;

/** A JSON-RPC message as it arrives: a request (with id) or a notification (without). */
export const JsonRpcMessageSchema = z.object({
  jsonrpc: z.literal('2.0'),
  id: RequestIdSchema.optional(),
  method: z.string().min(1),
  params: JsonObjectSchema.optional(),
});
export type JsonRpcMessage = z.infer<typeof JsonRpcMessageSchema>;

export const ClientCapabilitiesSchema = z
  .object({
    extensions: JsonObjectSchema.optional(),
    elicitation: JsonObjectSchema.optional(),
    sampling: JsonObjectSchema.optional(),
    roots: JsonObjectSchema.optional(),
  })
  .loose();
export type ClientCapabilities = z.infer<typeof ClientCapabilitiesSchema>;

export const LOG_LEVELS = [
  'debug',
  'info',
  'notice',
  'warning',
  'error',
  'critical',
  'alert',
  'emergency',
] as const;

/** The per-request `_meta` envelope every 2026-07-28 request carries. */
export const RequestMetaSchema = z
  .object({
    [META_PROTOCOL_VERSION]: z.string(),
    [META_CLIENT_CAPABILITIES]: ClientCapabilitiesSchema,
    [META_CLIENT_INFO]: z.object({ name: z.string(), version: z.string() }).loose().optional(),
    [META_LOG_LEVEL]: z.enum(LOG_LEVELS).optional(),
    progressToken: z.union([z.string(), z.number().int()]).optional(),
  })
  .loose();
export type RequestMeta = z.infer<typeof RequestMetaSchema>;

export const TaskIdSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9_-]+$/);

export const InputResponsesSchema = z.record(z.string(), JsonObjectSchema);
export type InputResponses = z.infer<typeof InputResponsesSchema>;

export const CallToolParamsSchema = z
  .object({
    name: z.string(),
    arguments: JsonObjectSchema.optional(),
    inputResponses: InputResponsesSchema.optional(),
    requestState: z.string().optional(),
  })
  .loose();

export const TaskIdParamsSchema = z.object({ taskId: z.string() }).loose();

export const UpdateTaskParamsSchema = z
  .object({ taskId: z.string(), inputResponses: InputResponsesSchema })
  .loose();

export const ListParamsSchema = z.object({ cursor: z.string().optional() }).loose();

/** An input request as it appears in `inputRequests`: an elicitation, sampling or roots request. */
export interface InputRequest {
  method: 'elicitation/create' | 'sampling/createMessage' | 'roots/list';
  params?: JsonObject;
}
export type InputRequests = Record<string, InputRequest>;

export interface Implementation {
  name: string;
  version: string;
}

/** Content blocks and CallToolResult, as tools produce them. */
export type ContentBlock =
  | { type: 'text'; text: string; annotations?: JsonObject; _meta?: JsonObject }
  | { type: 'image' | 'audio'; data: string; mimeType: string; annotations?: JsonObject; _meta?: JsonObject }
  | { type: 'resource'; resource: JsonObject; annotations?: JsonObject; _meta?: JsonObject }
  | ({ type: 'resource_link'; uri: string; name: string } & JsonObject);

export interface CallToolResult {
  content: ContentBlock[];
  structuredContent?: unknown;
  isError?: boolean;
  _meta?: JsonObject;
}

export const TASK_STATUSES = ['working', 'input_required', 'completed', 'failed', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** A JSON-RPC notification sent on a synchronous call's SSE stream. */
export interface Notification {
  method: string;
  params?: JsonObject;
}

/** A value of a form elicitation's answer (the spec's primitive schema types). */
export type ElicitValue = string | number | boolean | string[];

/** The client's answer to `elicitation/create`: `content` holds the form's values when `action` is `accept`. */
export interface ElicitResult {
  action: 'accept' | 'decline' | 'cancel';
  content?: Record<string, ElicitValue>;
  _meta?: JsonObject;
}
