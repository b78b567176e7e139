/** The two output guards of issue 10: control characters escaped for terminals, secrets redacted everywhere. */
import { afterEach, describe, expect, it } from 'vitest';
import { printable } from '../../commands/support/terminal.js';
import { clearSecrets, redact, redactDeep, registerSecret } from '../../src/config/redact.js';

afterEach(() => clearSecrets());

describe('printable', () => {
  it('writes control characters as visible escapes and leaves ordinary text alone', () => {
    expect(printable('ord_1042 café ✓')).toBe('ord_1042 café ✓');
    expect(printable('a\u001b[2Jb')).toBe('a\\x1b[2Jb');
    expect(printable('t\u001b]0;pwned\u0007')).toBe('t\\x1b]0;pwned\\x07');
    expect(printable('l1\nl2\r\t\u0000\u007f\u009b')).toBe('l1\\nl2\\r\\t\\x00\\x7f\\x9b');
    expect(printable('abc\u202edcba')).toBe('abc\\u202edcba');
    expect(printable(null)).toBe('');
  });
});

describe('redaction', () => {
  it('hides a postgres URL password given as user:pw@ or ?password=', () => {
    expect(redact('postgres://u:s3cret@h/db')).toBe('postgres://u:[redacted]@h/db');
    expect(redact('postgres://u@h/db?sslmode=require&password=s3cret&x=1')).toBe(
      'postgres://u@h/db?sslmode=require&password=[redacted]&x=1',
    );
    expect(redact('postgres://u@h/db?password=s3cret')).not.toContain('s3cret');
    expect(redact('postgres://role@h/db')).toBe('postgres://role@h/db');
  });

  it('hides any URL’s user-info: the password (the user name stays), or a lone token', () => {
    expect(redact('GET http://svcuser:pw@127.0.0.1:8080/v1?x=1 failed')).toBe(
      'GET http://svcuser:[redacted]@127.0.0.1:8080/v1?x=1 failed',
    );
    expect(redact('{"baseUrl":"https://tok_9f8e7d6c@api.example.com/v1"}')).toBe(
      '{"baseUrl":"https://[redacted]@api.example.com/v1"}',
    );
    // A password holding '@' or '/' is hidden whole; an '@' after the path is not user-info.
    expect(redact('https://u:p@ss@h/x')).toBe('https://u:[redacted]@h/x');
    expect(redact('postgres://u:pa/ss@h/db')).toBe('postgres://u:[redacted]@h/db');
    expect(redact('https://h.example/a?email=ada@example.com')).toBe('https://h.example/a?email=ada@example.com');
    expect(redact('see https://h.example and ada@example.com')).toBe('see https://h.example and ada@example.com');
  });

  it('redactDeep hides registered secrets in every string and key of a provider result, keeping Dates', () => {
    registerSecret('tok_abcdef');
    const created = new Date(0);
    const out = redactDeep({
      outcome: 'unknown',
      provider_request_id: 'req_tok_abcdef',
      txn: { created, raw: { headers: ['Bearer tok_abcdef'], ['k_tok_abcdef']: 1 } },
    });
    expect(JSON.stringify(out)).not.toContain('tok_abcdef');
    expect(out.provider_request_id).toBe('req_[redacted]');
    expect(out.txn.created).toBe(created);
  });

  it('redactDeep returns a clean value as it is, and copies (never edits) one that holds a secret', () => {
    registerSecret('tok_abcdef');
    const clean = { id: 'evt_1', data: { object: { id: 're_1', metadata: { a: 'b' } } }, list: ['x', { y: 1 }] };
    expect(redactDeep(clean)).toBe(clean);
    // A copy when asked for (a module provider's answers): every object and array new, equal.
    const copied = redactDeep(clean, { copy: true });
    expect(copied).not.toBe(clean);
    expect(copied.data.object).not.toBe(clean.data.object);
    expect(copied.list).not.toBe(clean.list);
    expect(JSON.parse(JSON.stringify(copied))).toEqual(clean);
    const dirty = {
      id: 'evt_2',
      keep: { a: 1 },
      list: ['x', 'has tok_abcdef', { y: 1 }],
      deep: { k: [{ tok_abcdef: true }] },
      last: 'z',
    };
    const before = structuredClone(dirty);
    const out = redactDeep(dirty);
    expect(dirty).toEqual(before);
    expect(JSON.parse(JSON.stringify(out))).toEqual({
      id: 'evt_2',
      keep: { a: 1 },
      list: ['x', 'has [redacted]', { y: 1 }],
      deep: { k: [{ '[redacted]': true }] },
      last: 'z',
    });
    // What holds nothing to redact inside a copied value is shared, not copied again.
    expect(out.keep).toBe(dirty.keep);
    expect(out.list[2]).toBe(dirty.list[2]);
  });
});
