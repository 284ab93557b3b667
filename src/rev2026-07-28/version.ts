/** The revision this folder speaks, in `MCP-Protocol-Version` and `_meta`'s protocolVersion. */
export const PROTOCOL_VERSION = '2026-07-28';

/** The versions a 2026-07-28 request may name (another is -32022, listing these). */
export const SUPPORTED_VERSIONS = [PROTOCOL_VERSION] as const;
