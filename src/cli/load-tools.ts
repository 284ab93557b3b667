import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { coerceError } from '../log.ts';
import type { PromptDefinition } from '../prompts/define.ts';
import type { ResourceDefinition, ResourceTemplateDefinition } from '../resources/define.ts';
import type { ToolDefinition } from '../tools/define.ts';
import type { ScheduleDefinition } from '../launch/schedules/define.ts';
import type { TriggerDefinition } from '../launch/triggers/define.ts';
import { TriggerRegistry } from '../launch/triggers/registry.ts';

/** What a `--tools` module provides: named exports, or the same as its default export (or a default array of tools). */
export interface ToolsModule {
  tools: readonly ToolDefinition[];
  resources?: readonly ResourceDefinition[];
  resourceTemplates?: readonly ResourceTemplateDefinition[];
  prompts?: readonly PromptDefinition[];
  /** Tools called on a clock (defineSchedule). */
  schedules?: readonly ScheduleDefinition[];
  /** Webhook triggers (`defineTrigger`), each of one of `tools`. */
  triggers?: readonly TriggerDefinition[];
}

const TS = /\.(ts|mts|cts)$/;

/**
 * Imports a user's tools module. TypeScript needs no build step: Node's own type stripping
 * (Node >= 22.18, or 22.12 with --experimental-strip-types) loads it, or tsx when it is installed.
 */
export async function loadToolsModule(file: string, cwd = process.cwd()): Promise<ToolsModule> {
  const abs = path.resolve(cwd, file);
  if (!existsSync(abs)) throw new Error(`--tools: ${abs} does not exist`);
  assertModuleKind(abs, file);
  const url = pathToFileURL(abs).href;
  let load: () => Promise<unknown> = () => import(url);
  if (TS.test(abs) && !process.features.typescript && !tsxLoaded()) {
    let tsImport: ((specifier: string, parent: string) => Promise<unknown>) | undefined;
    try {
      ({ tsImport } = (await import('tsx/esm/api')) as { tsImport: typeof tsImport });
    } catch {
      throw new Error(
        `--tools ${file}: this Node (${process.versions.node}) cannot load TypeScript by itself; ` +
          'use Node >= 22.18, run with --experimental-strip-types, install tsx, or compile the module to .js',
      );
    }
    load = () => tsImport!(url, import.meta.url);
  }
  const mod = (await load().catch((err: unknown) => {
    throw loadError(err, abs, file);
  })) as Record<string, unknown>;
  return toolsFrom(mod, file);
}

const CJS_MESSAGE = (file: string) =>
  `--tools ${file}: Node loads it as CommonJS, but it is an ES module: add "type": "module" to ` +
  'its package.json (npm pkg set type=module), or name it .mts';

/**
 * Refuses, before Node tries (and prints a warning of its own), an ES module that its package says is
 * CommonJS: `npm init -y` writes `"type": "commonjs"`.
 */
function assertModuleKind(abs: string, file: string): void {
  if (!/\.(ts|js)$/.test(abs)) return;
  for (let dir = path.dirname(abs); ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest)) {
      let type: unknown;
      try {
        type = (JSON.parse(readFileSync(manifest, 'utf8')) as { type?: unknown }).type;
      } catch {
        return;
      }
      const esm = /^\s*(import|export)\s/m.test(readFileSync(abs, 'utf8'));
      if (type === 'commonjs' && esm) throw new Error(CJS_MESSAGE(file));
      return;
    }
    if (path.dirname(dir) === dir) return;
  }
}

/**
 * What went wrong loading a tools module, in one line: ESM syntax in a module Node loads as CommonJS
 * (a project without `"type": "module"`), or what the module threw, with the line of the module it
 * came from.
 */
function loadError(err: unknown, abs: string, file: string): Error {
  const error = coerceError(err);
  if (/Cannot use import statement outside a module|Unexpected token 'export'/.test(error.message)) {
    return new Error(CJS_MESSAGE(file), { cause: err });
  }
  const href = pathToFileURL(abs).href;
  const frame = (error.stack ?? '')
    .split('\n')
    .map((line) => /(?:\(|at )(\S+?):(\d+):\d+\)?$/.exec(line.trim()))
    .find((m) => m !== null && (m[1] === abs || m[1] === href));
  const where = frame === undefined || frame === null ? '' : ` (${file}:${frame[2]})`;
  return new Error(`--tools ${file} failed to load: ${error.message}${where}`, { cause: err });
}

/** Whether tsx's loader is already registered (e.g. `node --import tsx`), which handles `.ts` itself. */
function tsxLoaded(): boolean {
  return process.execArgv.some((a) => a.includes('tsx')) || (process.env.NODE_OPTIONS ?? '').includes('tsx');
}

function toolsFrom(mod: Record<string, unknown>, file: string): ToolsModule {
  const def = mod.default;
  const source = (
    Array.isArray(def) ? { tools: def } : typeof def === 'object' && def !== null ? def : mod
  ) as Record<string, unknown>;
  const list = <T>(key: string, check: (v: unknown) => boolean, what: string): T[] | undefined => {
    const value = source[key];
    if (value === undefined) return undefined;
    if (!Array.isArray(value) || !value.every(check)) {
      throw new Error(`--tools ${file}: \`${key}\` must be an array of ${what}`);
    }
    return value as T[];
  };
  const named = (v: unknown) =>
    typeof v === 'object' && v !== null && typeof (v as { name?: unknown }).name === 'string';
  const tools = list<ToolDefinition>(
    'tools',
    (v) => named(v) && typeof (v as { handler?: unknown }).handler === 'function',
    'tools (defineTool)',
  );
  if (tools === undefined || tools.length === 0) {
    throw new Error(
      `--tools ${file}: export \`tools\` (an array of defineTool(...)) or a default export with it`,
    );
  }
  const triggers = list<TriggerDefinition>(
    'triggers',
    (v) => named(v) && typeof (v as { verify?: unknown }).verify === 'function',
    'triggers (defineTrigger)',
  );
  try {
    // An unknown tool or a name defined twice: one line now, not a 404 at the first delivery.
    new TriggerRegistry(triggers ?? [], tools);
  } catch (err) {
    throw new Error(`--tools ${file}: ${coerceError(err).message}`);
  }
  return {
    tools,
    triggers,
    resources: list('resources', named, 'resources (defineResource)'),
    resourceTemplates: list('resourceTemplates', named, 'resource templates (defineResourceTemplate)'),
    prompts: list('prompts', named, 'prompts (definePrompt)'),
    schedules: list(
      'schedules',
      (v) => named(v) && typeof (v as { cron?: unknown }).cron === 'string',
      'schedules (defineSchedule)',
    ),
  };
}
