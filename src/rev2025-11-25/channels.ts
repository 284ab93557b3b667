/**
 * The NOTIFY channels of the 2025-11-25 revision, beside the core's (src/events/change-feed.ts): the
 * composition root has the process's one LISTEN connection listen on both.
 */
export const SESSION_CHANNELS = {
  /** A session ended (DELETE): every instance forgets it and closes its streams. Payload: the session id. */
  ended: 'mcp_session_ended',
  /** A session's stored state changed (its log level): every instance re-reads it. Payload: the session id. */
  changed: 'mcp_session_changed',
  /**
   * An instance forgot a session it heard `ended` or `changed` for: the instance that ended or changed
   * it answers once every serving instance has. Payload: `session instance`.
   */
  forgotten: 'mcp_session_forgotten',
  /** A session's stream got an event: a resumed stream on another instance forwards it. Payload: `session stream`. */
  event: 'mcp_session_events',
  /**
   * A client resumed a GET stream (Last-Event-ID): the instance still writing it, if any, stops.
   * Payload: `session stream producer` (the resuming producer's own token).
   */
  taken: 'mcp_session_stream_taken',
  /** A client answered a request the server sent it: the instance waiting for it reads it. Payload: `session request`. */
  response: 'mcp_session_responses',
  /** A client cancelled one of its requests (notifications/cancelled): whoever runs it stops. Payload: `session request`. */
  cancel: 'mcp_request_cancelled',
} as const;
