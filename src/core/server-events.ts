export type ListKind = 'tools' | 'prompts' | 'resources';

/** Server-side notifications a tool (or the application) can raise; they reach listeners on every instance. */
export interface ServerEvents {
  listChanged(kind: ListKind): Promise<void>;
  resourceUpdated(uri: string): Promise<void>;
}

/** For processes or tests without a database: events go nowhere. */
export const NO_EVENTS: ServerEvents = {
  listChanged: async () => {},
  resourceUpdated: async () => {},
};
