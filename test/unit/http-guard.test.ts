/**
 * The checks `recon mcp --http` makes on a request's headers before it reaches a session
 * (src/agent/http-guard.ts); the server's answers are tested in test/integration/mcp-http.test.ts.
 */
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { allowedOrigin, AuthFailures, isLoopback, rebindingRefusal } from '../../src/agent/http-guard.js';
import { UsageError } from '../../src/errors.js';

describe('isLoopback', () => {
  it.each(['127.0.0.1', '127.1.2.3', 'localhost', 'LOCALHOST', '::1', '[::1]', '::ffff:127.0.0.1'])('%s is', (h) =>
    expect(isLoopback(h)).toBe(true),
  );
  it.each(['0.0.0.0', '::', '10.0.0.5', '192.168.1.2', 'localhost.evil.example', '127.0.0.1.evil.example', ''])(
    '%s is not',
    (h) => expect(isLoopback(h)).toBe(false),
  );
});

describe('allowedOrigin', () => {
  it.each([
    ['https://console.example.com', 'https://console.example.com'],
    ['https://Console.Example.com/', 'https://console.example.com'],
    ['https://console.example.com:443', 'https://console.example.com'],
    ['http://localhost:5173', 'http://localhost:5173'],
    ['http://[::1]:5173', 'http://[::1]:5173'],
  ])('%s is the origin %s', (value, origin) => expect(allowedOrigin(value)).toBe(origin));

  it.each([
    'console.example.com',
    'https://console.example.com/app',
    'https://a.example?x=1',
    'ftp://a.example',
    'null',
  ])('%s is refused, naming the flag', (value) => {
    expect(() => allowedOrigin(value)).toThrow(UsageError);
    expect(() => allowedOrigin(value)).toThrow(/^--allow-origin: .* is not an origin/);
  });
});

describe('rebindingRefusal', () => {
  const req = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;
  const origins = new Set(['https://console.example.com']);

  it('on loopback: a loopback Host with any port passes; another name, or none, is refused', () => {
    const o = { loopback: true, origins };
    for (const host of ['127.0.0.1:8765', 'localhost', '[::1]:1'])
      expect(rebindingRefusal(req({ host }), o)).toBeUndefined();
    for (const host of ['evil.example:8765', 'localhost.evil.example'])
      expect(rebindingRefusal(req({ host }), o)).toMatch(/^Forbidden: Host .* is not a loopback name/);
    expect(rebindingRefusal(req({}), o)).toMatch(/^Forbidden: Host \(none\)/);
  });

  it('beyond loopback any Host passes; an Origin passes only when allowed, and no Origin always', () => {
    const o = { loopback: false, origins };
    expect(rebindingRefusal(req({ host: 'recon.internal:8765' }), o)).toBeUndefined();
    expect(rebindingRefusal(req({ host: 'x', origin: 'https://console.example.com' }), o)).toBeUndefined();
    for (const origin of ['https://evil.example', 'null', 'https://console.example.com:8443'])
      expect(rebindingRefusal(req({ host: 'x', origin }), o)).toMatch(/^Forbidden: Origin .* is not allowed/);
  });
});

describe('AuthFailures', () => {
  it('refuses an address from its limit-th failure until the window from its first one ends; others are not affected', () => {
    let now = 0;
    const f = new AuthFailures(() => now, 3, 60_000);
    expect(f.fail('a')).toBe(false);
    now = 10_000;
    expect(f.fail('a')).toBe(false);
    expect(f.blockedUntil('a')).toBeUndefined();
    expect(f.fail('a')).toBe(true); // the limit: worth one line to the operator
    expect(f.blockedUntil('a')).toBe(60_000);
    expect(f.blockedUntil('b')).toBeUndefined();
    now = 59_999;
    expect(f.blockedUntil('a')).toBe(60_000);
    now = 60_000;
    expect(f.blockedUntil('a')).toBeUndefined();
    expect(f.fail('a')).toBe(false); // a new window
  });

  it('keeps at most maxAddresses, dropping the oldest, and sweeps expired ones', () => {
    let now = 0;
    const f = new AuthFailures(() => now, 1, 1000, 2);
    f.fail('a');
    f.fail('b');
    f.fail('c');
    expect(f.blockedUntil('a')).toBeUndefined();
    expect(f.blockedUntil('b')).toBe(1000);
    expect(f.blockedUntil('c')).toBe(1000);
    now = 1000;
    f.sweep();
    expect(f.blockedUntil('b')).toBeUndefined();
  });
});
