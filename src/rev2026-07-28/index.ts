/**
 * The 2026-07-28 revision: its HTTP transport (one JSON-RPC message per POST, the `_meta` envelope and
 * the routing headers that mirror it, JSON or a late SSE stream) and its version. The method handlers
 * it dispatches to are shared (src/protocol). Only the composition root imports this folder (a lint rule
 * keeps it so): it hands the router the transport.
 */
export { createTransport, type TransportOptions } from './transport.ts';
export { PROTOCOL_VERSION, SUPPORTED_VERSIONS } from './version.ts';
