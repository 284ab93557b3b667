// How `durable-mcp-tasks call` asks a task's questions: form elicitations field by field, on stderr,
// answers read from stdin.
import { createInterface, type Interface } from 'node:readline/promises';
import { isJsonObject } from '../core/wire.ts';

type Json = Record<string, unknown>;

/** The JSON Schema types a property accepts (`type` may be a string or a list). */
export function typesOf(schema: unknown): string[] {
  if (!isJsonObject(schema)) return [];
  if (typeof schema.type === 'string') return [schema.type];
  if (Array.isArray(schema.type)) return schema.type.filter((t): t is string => typeof t === 'string');
  for (const key of ['anyOf', 'oneOf'] as const) {
    const alts = schema[key];
    if (Array.isArray(alts)) return alts.flatMap(typesOf);
  }
  return [];
}

export interface Asker {
  ask(question: string): Promise<string | undefined>;
  close(): void;
}

/**
 * Line prompts on stdin/stderr; `undefined` once stdin has ended or the user interrupted (then every
 * question is declined).
 */
export function createAsker(interrupt: AbortSignal, onInterrupt: () => void): Asker {
  let rl: Interface | undefined;
  let ended = false;
  const lines: string[] = [];
  const waiting: ((line: string | undefined) => void)[] = [];
  interrupt.addEventListener('abort', () => {
    for (const w of waiting.splice(0)) w(undefined);
  });
  const open = (): Interface => {
    if (rl !== undefined) return rl;
    const created = createInterface({
      input: process.stdin,
      output: process.stderr,
      terminal: process.stdin.isTTY,
    });
    created.on('line', (line) => {
      const w = waiting.shift();
      if (w === undefined) lines.push(line);
      else w(line);
    });
    created.on('close', () => {
      ended = true;
      for (const w of waiting.splice(0)) w(undefined);
    });
    // In raw mode Ctrl-C reaches readline, not the process: it still means "cancel the task".
    created.on('SIGINT', onInterrupt);
    rl = created;
    return created;
  };
  return {
    ask(question) {
      const r = open();
      process.stderr.write(question);
      // Without a terminal the answer is not echoed: end the prompt's line once it is read.
      const echo = (line: string | undefined) => {
        if (!process.stdin.isTTY) process.stderr.write('\n');
        return line;
      };
      const queued = lines.shift();
      if (queued !== undefined) return Promise.resolve(echo(queued));
      if (ended || interrupt.aborted) return Promise.resolve(echo(undefined));
      r.resume();
      return new Promise<string | undefined>((resolve) => waiting.push(resolve)).then(echo);
    },
    close() {
      rl?.close();
    },
  };
}

type Answer = { action: 'accept'; content: Json } | { action: 'decline' } | { action: 'cancel' };

function fieldHint(schema: Json): string {
  const choices = Array.isArray(schema.enum)
    ? schema.enum
    : isJsonObject(schema.items) && Array.isArray(schema.items.enum)
      ? schema.items.enum
      : undefined;
  const types = typesOf(schema);
  if (choices !== undefined)
    return ` (${choices.map(String).join('/')}${types[0] === 'array' ? ', comma-separated' : ''})`;
  if (types.includes('boolean')) return ' (y/n)';
  if (types.includes('integer') || types.includes('number')) return ' (a number)';
  return '';
}

/** One answer as the field's schema types it, or an error message to ask again with. */
export function parseField(raw: string, schema: Json): { value: unknown } | { problem: string } {
  const types = typesOf(schema);
  const text = raw.trim();
  if (types.includes('boolean')) {
    if (/^(y|yes|true)$/i.test(text)) return { value: true };
    if (/^(n|no|false)$/i.test(text)) return { value: false };
    return { problem: 'answer y or n' };
  }
  if (types.includes('integer') || types.includes('number')) {
    const n = Number(text);
    if (text === '' || !Number.isFinite(n)) return { problem: 'answer a number' };
    if (types.includes('integer') && !types.includes('number') && !Number.isInteger(n))
      return { problem: 'answer a whole number' };
    return { value: n };
  }
  if (types.includes('array')) {
    const items = text
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    const allowed =
      isJsonObject(schema.items) && Array.isArray(schema.items.enum) ? schema.items.enum : undefined;
    const bad = allowed === undefined ? undefined : items.find((i) => !allowed.includes(i));
    return bad === undefined ? { value: items } : { problem: `${bad} is not one of ${allowed?.join(', ')}` };
  }
  if (Array.isArray(schema.enum) && !schema.enum.includes(text))
    return { problem: `answer one of ${schema.enum.join(', ')}` };
  return { value: text };
}

/**
 * A form elicitation asked field by field. An empty answer leaves an optional field out (or takes its
 * default); end of input declines.
 */
async function askForm(asker: Asker, params: Json): Promise<Answer> {
  process.stderr.write(
    `? ${typeof params.message === 'string' ? params.message : 'The task asks for input'}\n`,
  );
  const schema = isJsonObject(params.requestedSchema) ? params.requestedSchema : {};
  const properties = isJsonObject(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required.map(String) : []);
  const content: Json = {};
  for (const [key, raw] of Object.entries(properties)) {
    const field = isJsonObject(raw) ? raw : {};
    const label = typeof field.title === 'string' ? field.title : key;
    const def = field.default === undefined ? '' : ` [${JSON.stringify(field.default)}]`;
    for (;;) {
      const answer = await asker.ask(`  ${label}${fieldHint(field)}${def}: `);
      if (answer === undefined) return { action: 'decline' };
      if (answer.trim() === '') {
        if (field.default !== undefined) content[key] = field.default;
        if (field.default !== undefined || !required.has(key)) break;
        process.stderr.write('    an answer is required\n');
        continue;
      }
      const parsed = parseField(answer, field);
      if ('value' in parsed) {
        content[key] = parsed.value;
        break;
      }
      process.stderr.write(`    ${parsed.problem}\n`);
    }
  }
  return { action: 'accept', content };
}

export async function answerAll(asker: Asker, requests: Json): Promise<Record<string, Json>> {
  const responses: Record<string, Json> = {};
  for (const [key, request] of Object.entries(requests)) {
    if (!isJsonObject(request)) continue;
    const params = isJsonObject(request.params) ? request.params : {};
    if (request.method === 'elicitation/create' && (params.mode === undefined || params.mode === 'form')) {
      responses[key] = await askForm(asker, params);
    } else {
      process.stderr.write(
        `the task asks for ${String(request.method)}, which this client does not support\n`,
      );
      responses[key] = { action: 'decline' };
    }
  }
  return responses;
}
