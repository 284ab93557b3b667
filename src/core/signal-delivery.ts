/**
 * What delivering a signal from outside came to (`POST /signals/{token}`, `server.deliverSignal`):
 * only `delivered` stored the payload. Public, so it must not reach the database's types.
 */
export type SignalDelivery = 'delivered' | 'unknown' | 'already_delivered' | 'timed_out' | 'task_ended';

/** Where a signal is delivered (`POST`), below the server's origin. */
export const SIGNALS_PATH = '/signals';

/** The path of the signal whose token is `token`. */
export const signalPath = (token: string) => `${SIGNALS_PATH}/${token}`;
