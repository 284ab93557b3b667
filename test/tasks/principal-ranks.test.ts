// The ranks a process keeps between creates (src/tasks/principal-ranks.ts): fresh, bounded.
import { describe, expect, it } from 'vitest';
import { PrincipalRanks } from '../../src/tasks/principal-ranks.ts';

describe('PrincipalRanks', () => {
  it('gives the rank read, counting the task being created, until it is older than maxAgeMs', () => {
    const ranks = new PrincipalRanks({ maxAgeMs: 1_000 });
    expect(ranks.recent('alice', 0)).toBeUndefined();
    ranks.read('alice', 4, 0);
    expect(ranks.recent('alice', 1_000)).toBe(5);
    expect(ranks.recent('alice', 1_001)).toBeUndefined();
  });

  it('keeps at most maxPrincipals, forgetting the least recently read first', () => {
    const ranks = new PrincipalRanks({ maxPrincipals: 2 });
    ranks.read('a', 1, 0);
    ranks.read('b', 1, 0);
    ranks.read('a', 2, 0); // a read again: b is now the oldest
    ranks.read('c', 1, 0);
    expect([ranks.recent('a', 0), ranks.recent('b', 0), ranks.recent('c', 0)]).toEqual([3, undefined, 2]);
  });
});
