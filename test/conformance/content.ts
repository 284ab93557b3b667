/** Payloads the conformance suite expects from its "everything" fixture. */
export const PNG_1X1 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
export const WAV_TINY = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';

export const text = (t: string) => ({ type: 'text' as const, text: t });

export const form = (message: string, properties: Record<string, object>, required: string[] = []) => ({
  message,
  requestedSchema: { type: 'object', properties, ...(required.length > 0 ? { required } : {}) },
});
