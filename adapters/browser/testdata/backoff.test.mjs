// The reconnect wait: the same rule as the Go clients (internal/backoff).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoff } from '../replaybus.js';

test('the wait is jittered within its bounds', () => {
  const s = 1000;
  for (const [name, base, cap, fails, floor, lo, hi] of [
    ['first attempt', s, 30 * s, 0, 0, s / 2, s],
    ['doubled twice', s, 30 * s, 2, 0, 2 * s, 4 * s],
    ['capped', s, 30 * s, 10, 0, 15 * s, 30 * s],
    ['a cap below base keeps base', 4 * s, s, 3, 0, 2 * s, 4 * s],
    ['Retry-After is a floor', s, 30 * s, 0, 5 * s, 5 * s, 7.5 * s],
    ['a floor below the backoff', s, 30 * s, 3, s, s, 5 * s],
  ]) {
    const seen = new Set();
    for (let i = 0; i < 200; i++) {
      const d = backoff(base, cap, fails, floor);
      assert.ok(d >= lo && d <= hi, `${name}: ${d} not in [${lo}, ${hi}]`);
      seen.add(d);
    }
    assert.ok(seen.size > 100, `${name}: the wait is spread, not one instant`);
  }
});
