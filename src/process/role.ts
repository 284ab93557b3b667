/** What a process runs: the HTTP endpoint and the workers (`all`), or one of them. */
export type Role = 'all' | 'server' | 'worker';
