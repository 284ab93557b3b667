// Which synchronous tools run on the event loop (src/threads/loop-budget.ts): only those proved cheap
// on the threads, and never again one that held the loop past the budget.
import { describe, expect, it } from 'vitest';
import { LoopBudget } from '../../src/threads/loop-budget.ts';

describe('LoopBudget', () => {
  it('moves a tool to the loop after promoteAfter cheap runs in a row, counting again after a slow one', () => {
    const budget = new LoopBudget({ budgetUs: 1_000, promoteAfter: 3 });
    budget.ranOnThread('t', 0.2);
    budget.ranOnThread('t', 0.2);
    budget.ranOnThread('t', 5); // slow: the count starts over
    budget.ranOnThread('t', 0.2);
    budget.ranOnThread('t', 0.2);
    expect(budget.onLoop('t')).toBe(false);
    budget.ranOnThread('t', 0.2);
    expect(budget.onLoop('t')).toBe(true);
    expect(budget.onLoop('other')).toBe(false);
  });

  it('sends a tool back to the threads for good after a run on the loop far past the budget, or three past it in a row', () => {
    const budget = new LoopBudget({ budgetUs: 1_000, promoteAfter: 1 });
    budget.ranOnThread('t', 0.1);
    budget.ranOnThread('u', 0.1);
    expect(budget.ranOnLoop('t', 0.5)).toBe(false);
    expect(budget.onLoop('t')).toBe(true);
    expect(budget.ranOnLoop('t', 11)).toBe(true);
    expect(budget.onLoop('t')).toBe(false);
    // A run a little past it (a collection), then cheap ones: it stays; three in a row: it goes.
    expect([budget.ranOnLoop('u', 2), budget.ranOnLoop('u', 2), budget.ranOnLoop('u', 0.1)]).toEqual([
      false,
      false,
      false,
    ]);
    expect([budget.ranOnLoop('u', 2), budget.ranOnLoop('u', 2), budget.ranOnLoop('u', 2)]).toEqual([
      false,
      false,
      true,
    ]);
    expect(budget.onLoop('u')).toBe(false);
    for (let i = 0; i < 10; i++) budget.ranOnThread('t', 0.1);
    expect(budget.onLoop('t')).toBe(false);
  });

  it('keeps every tool on the threads with a budget of 0', () => {
    const budget = new LoopBudget({ budgetUs: 0, promoteAfter: 1 });
    budget.ranOnThread('t', 0);
    expect(budget.onLoop('t')).toBe(false);
  });
});
