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
    // re-hashes the payload it reads back (src/core/attempt/claims.ts): both must give the same text.
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

  it('writes integer keys in code-unit order too, though an object lists them in numeric order', () => {
    expect(canonicalJson({ b: 1, 9: 2, 10: 3, a: { 2: 0, 11: 1 } })).toBe('{"10":3,"9":2,"a":{"11":1,"2":0},"b":1}');
    expect(canonicalJson({ 10: 1, 9: 2 })).toBe('{"10":1,"9":2}');
  });

  it('never calls a toJSON, nor reads an array subclass otherwise than an array', () => {
    const own = Object.assign([1, 2], { toJSON: () => 'x' });
    const hidden = { a: 1 };
    Object.defineProperty(hidden, 'toJSON', { value: () => 'x', enumerable: false });
    class Items extends Array<number> {
      toJSON() {
        return 'x';
      }
    }
    expect(canonicalJson(own)).toBe('[1,2]');
    expect(canonicalJson({ v: hidden })).toBe('{"v":{"a":1}}');
    expect(canonicalJson(Items.from([1, 2]))).toBe('[1,2]');
  });

  it('keeps a key __proto__ of a parsed value as a key, sorted with the others', () => {
    expect(canonicalJson(JSON.parse('{"z":1,"__proto__":{"b":2,"a":1}}'))).toBe('{"__proto__":{"a":1,"b":2},"z":1}');
  });

  it('writes a value built with its keys in order, or in any other, the same', () => {
    const at = new Date('2024-05-01T00:00:00Z');
    const inOrder = { a: [1, { x: undefined, y: at }], b: { c: 'x', d: null }, e: undefined };
    const shuffled = { e: undefined, b: { d: null, c: 'x' }, a: [1, { y: at, x: undefined }] };
    const text = '{"a":[1,{"y":"2024-05-01T00:00:00.000Z"}],"b":{"c":"x","d":null}}';
    expect(canonicalJson(inOrder)).toBe(text);
    expect(canonicalJson(shuffled)).toBe(text);
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

/**
 * RFC 8785 (JSON Canonicalization Scheme): recon's canonical JSON is JCS for every value JSON can
 * hold. Keys sort by UTF-16 code units (what `Array.prototype.sort` does), strings are escaped as
 * JSON.stringify does (only `"`, `\` and C0 controls, with the short forms), and numbers are written
 * as ECMAScript writes them, which is how RFC 8785 defines them. Nothing had to change to pass these
 * vectors, so no stored payload hash changes. (recon is stricter than JCS where JCS has no answer:
 * it refuses NaN/Infinity, as RFC 8785 does; a lone surrogate is refused at validation.)
 */
describe('RFC 8785 test vectors', () => {
  it('§3.2.2: literals, numbers and string escapes', () => {
    const input =
      '{\n  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],\n' +
      '  "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",\n' +
      '  "literals": [null, true, false]\n}';
    expect(canonicalJson(JSON.parse(input))).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],' +
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
  });

  it('§3.2.3: property sorting by UTF-16 code units', () => {
    const input =
      '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return", "\\ufb33": "Hebrew Letter Dalet With Dagesh", ' +
      '"1": "One", "\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": "Control", ' +
      '"\\u00f6": "Latin Small Letter O With Diaeresis"}';
    expect(canonicalJson(JSON.parse(input))).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","ö":"Latin Small Letter O With Diaeresis",' +
        '"€":"Euro Sign","😀":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  it.each([
    ['0000000000000000', '0'],
    ['8000000000000000', '0'],
    ['0000000000000001', '5e-324'],
    ['8000000000000001', '-5e-324'],
    ['7fefffffffffffff', '1.7976931348623157e+308'],
    ['ffefffffffffffff', '-1.7976931348623157e+308'],
    ['4340000000000000', '9007199254740992'],
    ['c340000000000000', '-9007199254740992'],
    ['4430000000000000', '295147905179352830000'],
    ['44b52d02c7e14af5', '9.999999999999997e+22'],
    ['44b52d02c7e14af6', '1e+23'],
    ['44b52d02c7e14af7', '1.0000000000000001e+23'],
    ['444b1ae4d6e2ef4e', '999999999999999700000'],
    ['444b1ae4d6e2ef4f', '999999999999999900000'],
    ['444b1ae4d6e2ef50', '1e+21'],
    ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
    ['3eb0c6f7a0b5ed8d', '0.000001'],
    ['41b3de4355555553', '333333333.3333332'],
    ['41b3de4355555554', '333333333.33333325'],
    ['41b3de4355555555', '333333333.3333333'],
    ['41b3de4355555556', '333333333.3333334'],
    ['41b3de4355555557', '333333333.33333343'],
    ['becbf647612f3696', '-0.0000033333333333333333'],
    ['43143ff3c1cb0959', '1424953923781206.2'],
  ])('appendix B: the double 0x%s is written %s', (bits, text) => {
    const view = new DataView(new ArrayBuffer(8));
    view.setBigUint64(0, BigInt(`0x${bits}`));
    expect(canonicalJson(view.getFloat64(0))).toBe(text);
  });

  it.each([
    ['7fffffffffffffff', 'NaN'],
    ['7ff0000000000000', 'Infinity'],
  ])('appendix B: the double 0x%s (%s) is refused', (bits) => {
    const view = new DataView(new ArrayBuffer(8));
    view.setBigUint64(0, BigInt(`0x${bits}`));
    expect(() => canonicalJson({ n: view.getFloat64(0) })).toThrow(UsageError);
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
