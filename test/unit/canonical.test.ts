import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, payloadHash, sha256Hex } from '../../src/lib/canonical.js';
import { UsageError } from '../../src/errors.js';

describe('canonicalJson', () => {
  it('sorts keys recursively and drops whitespace', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: 'x' } })).toBe(
      '{"a":{"c":"x","d":[3,{"y":2,"z":1}]},"b":1}',
    );
  });

  it('keeps arrays in order, drops undefined members, and stores undefined array items as null', () => {
    expect(canonicalJson({ a: undefined, b: [2, 1, undefined] })).toBe('{"b":[2,1,null]}');
  });

  it('writes a hole in an array as null, as it is stored: the hash of a payload survives the store', () => {
    // A library caller's payload may be a sparse array; jsonb stores each hole as null, and a claim
    // re-hashes the payload it reads back (src/core/claims.ts): both must give the same text.
    const sparse: unknown[] = [1];
    sparse[2] = 3;
    const holeFirst: unknown[] = [];
    holeFirst[1] = 2;
    for (const value of [sparse, holeFirst, { items: sparse }]) {
      expect(canonicalJson(value)).toBe(canonicalJson(JSON.parse(JSON.stringify(value))));
    }
    expect([canonicalJson(sparse), canonicalJson(holeFirst)]).toEqual(['[1,null,3]', '[null,2]']);
  });

  it('writes Dates as ISO strings and primitives as JSON', () => {
    expect(canonicalJson({ at: new Date('2024-05-01T00:00:00Z'), t: true, f: false, n: null, s: 'é"\n' })).toBe(
      '{"at":"2024-05-01T00:00:00.000Z","f":false,"n":null,"s":"é\\"\\n","t":true}',
    );
    expect(canonicalJson(-0)).toBe('0');
    expect(canonicalJson(1e21)).toBe('1e+21');
  });

  it('sorts keys by UTF-16 code units, not locale', () => {
    expect(canonicalJson({ b: 1, B: 2, a: 3, é: 4, _: 5 })).toBe('{"B":2,"_":5,"a":3,"b":1,"é":4}');
  });

  it.each([
    [{ amount: NaN }, '$.amount: NaN is not a JSON number'],
    [{ a: [1, Infinity] }, '$.a[1]: Infinity is not a JSON number'],
    [{ a: 1n }, '$.a: a bigint is not JSON'],
    [{ a: () => 1 }, '$.a: a function is not JSON'],
    [{ a: new Map() }, '$.a: a Map is not JSON'],
    [{ a: new Date(NaN) }, '$.a: invalid Date'],
  ])('refuses %o instead of losing information', (value, message) => {
    expect(() => canonicalJson(value)).toThrow(UsageError);
    expect(() => canonicalJson(value)).toThrow(message);
  });

  it('refuses cycles but accepts the same object twice side by side', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow('$.self: circular reference');
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: shared })).toBe('{"a":{"x":1},"b":{"x":1}}');
  });

  it('is independent of key order and parses back to the same value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = canonicalJson(value);
        expect(canonicalJson(JSON.parse(text))).toBe(text);
        expect(canonicalJson(reverseKeys(value))).toBe(text);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
      }),
    );
  });
});

describe('hashes', () => {
  it('sha256Hex matches the known digest', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('payloadHash is the same for the same payload in another key order, and differs for a changed amount', () => {
    const a = payloadHash({ charge: 'ch_1', amount: 1000, currency: 'eur' });
    expect(payloadHash({ currency: 'eur', amount: 1000, charge: 'ch_1' })).toBe(a);
    expect(payloadHash({ charge: 'ch_1', amount: 1001, currency: 'eur' })).not.toBe(a);
    expect(a).toBe(sha256Hex('{"amount":1000,"charge":"ch_1","currency":"eur"}'));
  });
});

function reverseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reverseKeys);
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    // defineProperty, because fast-check generates "__proto__" keys and plain assignment would set the prototype.
    for (const key of Object.keys(value).reverse()) {
      const item = reverseKeys((value as Record<string, unknown>)[key]);
      Object.defineProperty(out, key, { value: item, enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  return value;
}
