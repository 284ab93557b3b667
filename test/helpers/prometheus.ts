import { createRequire } from 'node:module';

interface Sample {
  value?: string;
  count?: string;
  sum?: string;
  buckets?: Record<string, string>;
  labels?: Record<string, string>;
}
export interface Family {
  name: string;
  help: string;
  type: string;
  metrics: Sample[];
}

// A real parser of the text exposition format (a port of the Prometheus Python client's); it ships no types.
const parse = createRequire(import.meta.url)('parse-prometheus-text-format') as (text: string) => Family[];

export interface Scrape {
  families: Family[];
  text: string;
}

/** GET /metrics, parsed (the parser throws on text that is not the exposition format). */
export async function scrape(base: string, token?: string): Promise<Scrape> {
  const res = await fetch(
    `${base}/metrics`,
    token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } },
  );
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  if (!(res.headers.get('content-type') ?? '').startsWith('text/plain; version=0.0.4')) {
    throw new Error(`/metrics content type ${res.headers.get('content-type')}`);
  }
  const text = await res.text();
  return { families: parse(text), text };
}

/**
 * A sample's value; for a histogram, its count. Undefined when absent. The parser folds a histogram's
 * labelled series into one (it only knows unlabelled ones), so a histogram's `_count` line is read from
 * the text, after the parser has accepted it.
 */
export function sample(
  { families, text }: Scrape,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const family = families.find((f) => f.name === name);
  if (family === undefined) return undefined;
  if (family.type === 'HISTOGRAM') {
    for (const line of text.split('\n')) {
      const m = /^(\w+)_count\{(.*)\} (\S+)$/.exec(line);
      if (m === null || m[1] !== name) continue;
      const has = Object.entries(labels).every(([k, v]) => m[2]!.split(',').includes(`${k}="${v}"`));
      if (has) return Number(m[3]);
    }
    return undefined;
  }
  const match = family.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return match === undefined ? undefined : Number(match.value);
}
