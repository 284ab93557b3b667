import { missingCapability } from '../core/errors.ts';
import type { ClientCapabilities, InputRequests } from '../core/wire.ts';

const CAPABILITY_OF_METHOD = {
  'elicitation/create': 'elicitation',
  'sampling/createMessage': 'sampling',
  'roots/list': 'roots',
} as const;

/** Refuses (with -32021) to send an input request the client has not declared support for. */
export function assertInputSupported(requests: InputRequests, caps: ClientCapabilities): void {
  const missing: Record<string, object> = {};
  for (const request of Object.values(requests)) {
    const capability = CAPABILITY_OF_METHOD[request.method];
    if (caps[capability] === undefined) missing[capability] = {};
  }
  if (Object.keys(missing).length > 0) throw missingCapability(missing);
}
