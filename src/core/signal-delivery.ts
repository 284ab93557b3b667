/**
 * What delivering a signal from outside came to (`POST /signals/{token}`, `server.deliverSignal`):
 * only `delivered` stored the payload. Public, so it must not reach the database's types.
 */
export type SignalDelivery = 'delivered' | 'unknown' | 'already_delivered' | 'timed_out' | 'task_ended';
