import { describe, expect, it } from 'vitest';
import { TokenBucket, backoffDelay, limitConcurrency, retryAfterMs, withRetries } from '../../src/lib/ratelimit.js';
import { UsageError } from '../../src/errors.js';

/** A clock that only moves when something sleeps on it; records every sleep. */
function fakeClock(start = 1_000_000) {
  const clock = {
    t: start,
    sleeps: [] as number[],
    now: () => clock.t,
    sleep: async (ms: number) => {
      clock.sleeps.push(ms);
      clock.t += ms;
    },
  };
  return clock;
}

/** The most requests that fall in any half-open 1-second window [t, t + 1000). */
function maxPerSecond(times: number[]): number {
  let max = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i] - times[j] >= 1000) j++;
    max = Math.max(max, i - j + 1);
  }
  return max;
}

describe('TokenBucket', () => {
  it('paces from the first request: no burst, requests spaced at the configured rate', async () => {
    const clock = fakeClock();
    const bucket = new TokenBucket({ ratePerSec: 5, now: clock.now, sleep: clock.sleep });
    const startedAt: number[] = [];
    for (let i = 0; i < 6; i++) {
      await bucket.take();
      startedAt.push(clock.t - 1_000_000);
    }
    expect(startedAt).toEqual([0, 200, 400, 600, 800, 1000]);
  });

  it('never puts more than the rate into any 1-second window, the first one included, with takers served in order', async () => {
    const clock = fakeClock();
    const bucket = new TokenBucket({ ratePerSec: 100, now: clock.now, sleep: clock.sleep });
    const order: number[] = [];
    const times: number[] = [];
    await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        bucket.take().then(() => {
          order.push(i);
          times.push(clock.t - 1_000_000);
        }),
      ),
    );
    expect(order).toEqual(Array.from({ length: 300 }, (_, i) => i));
    expect(times.filter((t) => t < 1000)).toHaveLength(100);
    expect(maxPerSecond(times)).toBeLessThanOrEqual(100);
    // 300 requests at 100/s: the last one goes at 2.99 s, the full rate.
    expect(times.at(-1)).toBe(2990);
  });

  it('stays within the rate in every window when timers fire late, and keeps ≥ 95% of the rate', async () => {
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const clock = fakeClock();
    // setTimeout fires late, never early: 0–30 ms late here (a loaded machine), three slots and more.
    const lateSleep = async (ms: number) => {
      clock.t += ms + Math.floor(random() * 31);
    };
    const bucket = new TokenBucket({ ratePerSec: 100, now: clock.now, sleep: lateSleep });
    const times: number[] = [];
    await Promise.all(Array.from({ length: 1000 }, () => bucket.take().then(() => times.push(clock.t))));
    expect(maxPerSecond(times)).toBeLessThanOrEqual(100);
    const rate = (times.length - 1) / ((times.at(-1)! - times[0]) / 1000);
    expect(rate).toBeGreaterThanOrEqual(95);
  });

  it('does not turn a quiet period into a burst', async () => {
    const clock = fakeClock();
    const bucket = new TokenBucket({ ratePerSec: 10, now: clock.now, sleep: clock.sleep });
    for (let i = 0; i < 3; i++) await bucket.take();
    clock.t += 60_000;
    clock.sleeps.length = 0;
    await bucket.take();
    expect(clock.sleeps).toEqual([]);
    await bucket.take();
    expect(clock.sleeps).toEqual([100]);
  });

  it('holds every request back while paused by a Retry-After', async () => {
    const clock = fakeClock();
    const bucket = new TokenBucket({ ratePerSec: 10, now: clock.now, sleep: clock.sleep });
    await bucket.take();
    bucket.pause(2000);
    await bucket.take();
    expect(clock.t - 1_000_000).toBe(2000);
    await bucket.take();
    expect(clock.t - 1_000_000).toBe(2100);
  });

  it('with an infinite rate never waits', async () => {
    const clock = fakeClock();
    const bucket = new TokenBucket({ ratePerSec: Infinity, now: clock.now, sleep: clock.sleep });
    for (let i = 0; i < 1000; i++) await bucket.take();
    expect(clock.sleeps).toEqual([]);
  });

  it.each([0, -1, NaN])('refuses a rate of %d', (rate) => {
    expect(() => new TokenBucket({ ratePerSec: rate })).toThrow(UsageError);
  });
});

describe('backoffDelay', () => {
  it('doubles the ceiling per attempt up to maxMs, with full jitter', () => {
    const top = () => 0.999999;
    expect([0, 1, 2, 3, 10, 20].map((a) => backoffDelay(a, { random: top }))).toEqual([
      249, 499, 999, 1999, 29999, 29999,
    ]);
    expect(backoffDelay(5, { random: () => 0 })).toBe(0);
    expect(backoffDelay(2, { baseMs: 100, maxMs: 300, random: () => 0.5 })).toBe(150);
  });
});

describe('retryAfterMs', () => {
  const now = Date.parse('2024-05-01T12:00:00Z');
  it.each([
    ['2', 2000],
    [' 0 ', 0],
    ['Wed, 01 May 2024 12:00:30 GMT', 30_000],
    ['Wed, 01 May 2024 11:59:00 GMT', 0],
  ])('reads %j as %d ms', (value, ms) => {
    expect(retryAfterMs(value, now)).toBe(ms);
  });

  it.each([undefined, null, '', 'soon', '-1', '1.5', '5'.padStart(3, ' ') + 'x'])('ignores %j', (value) => {
    expect(retryAfterMs(value, now)).toBeUndefined();
  });
});

describe('withRetries', () => {
  class RateLimited extends Error {}

  it('retries retryable errors with the given delays, then succeeds', async () => {
    const clock = fakeClock();
    const calls: number[] = [];
    const result = await withRetries(
      async (attempt) => {
        calls.push(attempt);
        if (attempt < 2) throw new RateLimited('429');
        return 'ok';
      },
      {
        retries: 5,
        isRetryable: (e) => e instanceof RateLimited,
        delayFor: (_e, a) => 100 * (a + 1),
        sleep: clock.sleep,
      },
    );
    expect(result).toBe('ok');
    expect(calls).toEqual([0, 1, 2]);
    expect(clock.sleeps).toEqual([100, 200]);
  });

  it('rethrows the last error once retries are spent', async () => {
    const clock = fakeClock();
    let calls = 0;
    const last = new RateLimited('429 #3');
    await expect(
      withRetries(
        async () => {
          calls++;
          throw calls === 3 ? last : new RateLimited(`429 #${calls}`);
        },
        { retries: 2, isRetryable: () => true, delayFor: () => 1, sleep: clock.sleep },
      ),
    ).rejects.toBe(last);
    expect(calls).toBe(3);
  });

  it('does not retry an error that is not retryable', async () => {
    const clock = fakeClock();
    let calls = 0;
    await expect(
      withRetries(
        async () => {
          calls++;
          throw new Error('400 invalid_request_error');
        },
        { retries: 5, isRetryable: (e) => e instanceof RateLimited, sleep: clock.sleep },
      ),
    ).rejects.toThrow('400');
    expect(calls).toBe(1);
    expect(clock.sleeps).toEqual([]);
  });
});

describe('limitConcurrency', () => {
  it('runs at most n tasks at a time, in arrival order, and passes results and errors through', async () => {
    const limit = limitConcurrency(2);
    let active = 0;
    let peak = 0;
    const started: number[] = [];
    const gates = Array.from({ length: 5 }, gate);
    const results = Array.from({ length: 5 }, (_, i) =>
      limit(async () => {
        started.push(i);
        active++;
        peak = Math.max(peak, active);
        await gates[i].promise;
        active--;
        if (i === 3) throw new Error('task 3');
        return i * 10;
      }),
    );
    await tick();
    expect(started).toEqual([0, 1]);
    gates[1].resolve();
    await tick();
    expect(started).toEqual([0, 1, 2]);
    // A task submitted now queues behind the waiting ones.
    const late = limit(async () => {
      started.push(99);
      return 99;
    });
    gates.forEach((g) => g.resolve());
    const settled = await Promise.allSettled([...results, late]);
    expect(peak).toBe(2);
    expect(started).toEqual([0, 1, 2, 3, 4, 99]);
    expect(settled.map((s) => (s.status === 'fulfilled' ? s.value : (s.reason as Error).message))).toEqual([
      0,
      10,
      20,
      'task 3',
      40,
      99,
    ]);
  });

  it('keeps arrival order through a long queue that is drained while more arrive', async () => {
    // 5,000 queued behind 3 (a batch of recon run), 500 more arriving while the first ones run:
    // the queue is read from its head and compacted along the way; every task runs once, in order.
    const limit = limitConcurrency(3);
    const started: number[] = [];
    let active = 0;
    let peak = 0;
    const task = (i: number) =>
      limit(async () => {
        started.push(i);
        peak = Math.max(peak, ++active);
        await tick();
        active--;
        return i;
      });
    const first = Array.from({ length: 5000 }, (_, i) => task(i));
    await tick();
    const more = Array.from({ length: 500 }, (_, i) => task(5000 + i));
    const results = await Promise.all([...first, ...more]);
    expect(results).toEqual(Array.from({ length: 5500 }, (_, i) => i));
    expect(started).toEqual(results);
    expect(peak).toBe(3);
    // Empty again, it starts at once.
    await expect(task(-1)).resolves.toBe(-1);
  });

  it.each([0, 1.5, -1])('refuses a limit of %d', (n) => {
    expect(() => limitConcurrency(n)).toThrow(UsageError);
  });
});

async function tick(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

/** Promise.withResolvers is Node 22+; the engines field allows Node 20. */
function gate(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
