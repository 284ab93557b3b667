import { readFileSync } from 'node:fs';
import {
  CancelTaskResultV2Schema,
  CreateTaskResultV2Schema,
  GetTaskResultV2Schema,
  TaskStatusNotificationV2Schema,
  UpdateTaskResultV2Schema,
} from '@modelcontextprotocol/ext-tasks/core/v2';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { createRequire } from 'node:module';
import type { ZodType } from 'zod';

const SCHEMA = JSON.parse(
  readFileSync(new URL('../fixtures/mcp-2026-07-28.schema.json', import.meta.url), 'utf8'),
) as Record<string, unknown>;
const ajv = new Ajv2020({ strict: false, allErrors: true });
// ajv-formats is CommonJS with a default export that ESM interop wraps; require() gets the function.
const addFormats = createRequire(import.meta.url)('ajv-formats') as (a: Ajv2020) => void;
addFormats(ajv);
ajv.addSchema(SCHEMA, 'mcp');
const compiled = new Map<string, ValidateFunction>();

/** A validator for one definition; a plain predicate (ajv's own is a type guard that narrows to never). */
function def(name: string): { ok(data: unknown): boolean; errors(): unknown } {
  let v = compiled.get(name);
  if (v === undefined) {
    v = ajv.compile({ $ref: `mcp#/$defs/${name}` });
    compiled.set(name, v);
  }
  const validate = v;
  return { ok: (data) => validate(data), errors: () => validate.errors };
}

const ERROR_DEFS: Record<number, string> = {
  [-32700]: 'ParseError',
  [-32600]: 'InvalidRequestError',
  [-32601]: 'MethodNotFoundError',
  [-32602]: 'InvalidParamsError',
  [-32603]: 'InternalError',
  [-32020]: 'HeaderMismatchError',
  [-32021]: 'MissingRequiredClientCapabilityError',
  [-32022]: 'UnsupportedProtocolVersionError',
};

const RESULT_DEFS: Record<string, string> = {
  'server/discover': 'DiscoverResult',
  'tools/list': 'ListToolsResult',
  'subscriptions/listen': 'SubscriptionsListenResult',
};

const NOTIFICATION_DEFS: Record<string, string> = {
  'notifications/progress': 'ProgressNotification',
  'notifications/message': 'LoggingMessageNotification',
  'notifications/subscriptions/acknowledged': 'SubscriptionsAcknowledgedNotification',
  'notifications/tools/list_changed': 'ToolListChangedNotification',
  'notifications/prompts/list_changed': 'PromptListChangedNotification',
  'notifications/resources/list_changed': 'ResourceListChangedNotification',
  'notifications/resources/updated': 'ResourceUpdatedNotification',
};

const TASK_RESULT_SCHEMAS: Record<string, ZodType> = {
  'tasks/get': GetTaskResultV2Schema,
  'tasks/update': UpdateTaskResultV2Schema,
  'tasks/cancel': CancelTaskResultV2Schema,
  // SEP-2669 draft: steer acks like update; pause and resume answer the DetailedTask, as tasks/get.
  'tasks/steer': UpdateTaskResultV2Schema,
  'tasks/pause': GetTaskResultV2Schema,
  'tasks/resume': GetTaskResultV2Schema,
};

/**
 * Checks one JSON-RPC message the server sent against the 2026-07-28 schema (and ext-tasks' v2 zod
 * schemas for the tasks extension, which the core schema does not cover). Throws on any violation.
 */
export function assertWireValid(method: string, message: unknown): void {
  const fail = (what: string, errors: unknown) => {
    throw new Error(
      `${method}: ${what} violates the schema: ${JSON.stringify(errors)}\n${JSON.stringify(message)}`,
    );
  };
  const m = message as {
    error?: { code: number };
    result?: { resultType?: string };
    method?: string;
    params?: unknown;
  };
  if (m.method !== undefined) {
    const v = def('JSONRPCNotification');
    if (!v.ok(message)) fail('notification', v.errors());
    const specific = NOTIFICATION_DEFS[m.method];
    if (specific !== undefined) {
      const p = def(specific);
      if (!p.ok(message)) fail(specific, p.errors());
    }
    if (m.method === 'notifications/tasks') {
      const r = TaskStatusNotificationV2Schema.safeParse(message);
      if (!r.success) fail('notifications/tasks', r.error.issues);
    }
    return;
  }
  if (m.error !== undefined) {
    const envelope = def('JSONRPCErrorResponse');
    if (!envelope.ok(message)) fail('error response', envelope.errors());
    const specific = ERROR_DEFS[m.error.code];
    if (specific !== undefined) {
      // Some definitions describe the whole error response, others only its `error` member.
      const v = def(specific);
      const wholeResponse = (SCHEMA.$defs as Record<string, { properties?: object }>)[specific]?.properties;
      const subject = wholeResponse !== undefined && 'error' in wholeResponse ? message : m.error;
      if (!v.ok(subject)) fail(specific, v.errors());
    }
    return;
  }
  const envelope = def('JSONRPCResultResponse');
  if (!envelope.ok(message)) fail('result response', envelope.errors());
  const result = m.result!;
  const taskSchema = TASK_RESULT_SCHEMAS[method];
  if (taskSchema !== undefined) {
    const r = taskSchema.safeParse(result);
    if (!r.success) fail('tasks result', r.error.issues);
    return;
  }
  if (method === 'tools/call') {
    if (result.resultType === 'task') {
      const r = CreateTaskResultV2Schema.safeParse(result);
      if (!r.success) fail('CreateTaskResult', r.error.issues);
      return;
    }
    const v = def(result.resultType === 'input_required' ? 'InputRequiredResult' : 'CallToolResult');
    if (!v.ok(result)) fail(result.resultType ?? 'result', v.errors());
    return;
  }
  const name = RESULT_DEFS[method];
  if (name !== undefined) {
    const v = def(name);
    if (!v.ok(result)) fail(name, v.errors());
  }
}
