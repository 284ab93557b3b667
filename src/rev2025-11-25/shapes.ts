import type { ToolRegistry } from '../tools/registry.ts';
import { META_SERVER_INFO, type JsonObject } from '../core/wire.ts';

/** The revisions served with sessions (`initialize`), newest first. */
export const REV2025_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const;
export type Rev2025Version = (typeof REV2025_VERSIONS)[number];

/** The version a session gets: the client's, when served; otherwise the newest (the lifecycle page). */
export function negotiateVersion(requested: unknown): Rev2025Version {
  return (REV2025_VERSIONS as readonly unknown[]).includes(requested)
    ? (requested as Rev2025Version)
    : REV2025_VERSIONS[0];
}

/**
 * A 2026-07-28 result as the 2025 revisions shape it: no `resultType`, no caching hints, no
 * per-response serverInfo (the session's `initialize` carried it).
 */
export function toRev2025Result(result: JsonObject): JsonObject {
  const { resultType: _r, ttlMs: _t, cacheScope: _c, _meta, ...rest } = result;
  const meta = { ...(_meta as JsonObject | undefined) };
  delete meta[META_SERVER_INFO];
  return Object.keys(meta).length > 0 ? { ...rest, _meta: meta } : rest;
}

/**
 * A task as 2025-11-25 shapes it, from the 2026-07-28 `Task` fields (a CreateTaskResult, toWireTask):
 * the same fields, with `ttl` and `pollInterval` for `ttlMs` and `pollIntervalMs`.
 */
export function rev2025Task(task: JsonObject): JsonObject {
  return {
    taskId: task.taskId,
    status: task.status,
    ...(task.statusMessage === undefined ? {} : { statusMessage: task.statusMessage }),
    createdAt: task.createdAt,
    lastUpdatedAt: task.lastUpdatedAt,
    ttl: task.ttlMs,
    pollInterval: task.pollIntervalMs,
  };
}

const TASK_SUPPORT = { never: 'forbidden', optional: 'optional', required: 'required' } as const;

/** tools/list by registry and revision: the tools never change while a process runs. */
const listed = new WeakMap<ToolRegistry, Map<Rev2025Version, JsonObject[]>>();

/** tools/list at 2025-11-25: each tool with `execution.taskSupport` derived from its task policy. */
export function rev2025Tools(tools: ToolRegistry, version: Rev2025Version): JsonObject[] {
  let byVersion = listed.get(tools);
  if (byVersion === undefined) listed.set(tools, (byVersion = new Map<Rev2025Version, JsonObject[]>()));
  let list = byVersion.get(version);
  if (list === undefined) {
    list = tools.list().map((description) => {
      if (version !== '2025-11-25') return { ...description };
      const policy = tools.get(description.name).taskSupport ?? 'never';
      return { ...description, execution: { taskSupport: TASK_SUPPORT[policy] } };
    });
    byVersion.set(version, list);
  }
  return list;
}

/** What the server declares in `initialize`, from what it serves. */
export function rev2025Capabilities(opts: {
  version: Rev2025Version;
  resources: boolean;
  prompts: boolean;
}): JsonObject {
  return {
    tools: { listChanged: true },
    logging: {},
    ...(opts.resources ? { resources: { subscribe: true, listChanged: true } } : {}),
    ...(opts.prompts ? { prompts: { listChanged: true } } : {}),
    ...(opts.resources || opts.prompts ? { completions: {} } : {}),
    // 2025-11-25 tasks: task-augmented tools/call, tasks/list, tasks/cancel (tasks/get and
    // tasks/result come with them).
    ...(opts.version === '2025-11-25'
      ? { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } }
      : {}),
  };
}
