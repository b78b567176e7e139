import { describe, expect, it } from 'vitest';
import {
  MAX_PAYLOAD_BYTES,
  parseOperationsText,
  validateId,
  validateOperation,
} from '../../src/core/intake/validate.js';
import { UsageError } from '../../src/errors.js';
import { isCurrency } from '../../src/lib/money.js';
import type { JsonDoc } from '../support/cli.js';

const PROVIDERS = ['stripe', 'warehouse'];

const good = () => ({
  id: 'refund:ord_1042',
  provider: 'stripe',
  action: 'refund',
  payload: { payment_intent: 'pi_123', amount: 1999, currency: 'usd' },
  client_reference: 'ord_1042',
});

function usageError(fn: () => unknown): UsageError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(UsageError);
  const err = caught as UsageError;
  expect(err.exitCode).toBe(2);
  // One line: the CLI prints the message as is, and SPEC §7 promises a one-line error.
  expect(err.message).not.toMatch(/\n/);
  return err;
}

describe('validateOperation: every bad input of SPEC §7 names the field', () => {
  it('accepts a good operation, takes amount/currency from the payload and defaults the key to the id', () => {
    const op = validateOperation(good(), PROVIDERS);
    expect(op).toMatchObject({
      id: 'refund:ord_1042',
      provider: 'stripe',
      action: 'refund',
      idempotency_key: 'refund:ord_1042',
      client_reference: 'ord_1042',
      amount: 1999,
      currency: 'usd',
      approval: null,
      subject: null,
    });
  });

  it('lower-cases the currency and keeps an explicit idempotency key', () => {
    const op = validateOperation(
      { ...good(), payload: { amount: 5, currency: 'EUR' }, idempotency_key: 'k-1' },
      PROVIDERS,
    );
    expect(op.currency).toBe('eur');
    expect(op.idempotency_key).toBe('k-1');
  });

  it.each<[string, (o: JsonDoc) => void, RegExp]>([
    ['unknown provider', (o) => (o.provider = 'paypal'), /^provider: unknown provider "paypal".*stripe, warehouse/],
    ['missing provider', (o) => delete o.provider, /^provider: required/],
    [
      'negative amount',
      (o) => (o.payload.amount = -1),
      /^payload\.amount: -1 is not a valid amount; use a non-negative integer/,
    ],
    ['non-integer amount', (o) => (o.payload.amount = 19.99), /^payload\.amount: 19\.99 is not a valid amount/],
    ['amount given as a string', (o) => (o.payload.amount = '1999'), /^payload\.amount: "1999" is not a valid amount/],
    ['negative top-level amount', (o) => (o.amount = -5), /^amount: -5 is not a valid amount/],
    ['non-integer top-level amount', (o) => (o.amount = 1.5), /^amount: 1\.5 is not a valid amount/],
    [
      'unknown currency',
      (o) => (o.payload.currency = 'xyz'),
      /^payload\.currency: "xyz" is not a known ISO 4217 currency/,
    ],
    ['currency not 3 letters', (o) => (o.payload.currency = 'dollars'), /^payload\.currency: "dollars"/],
    ['unknown top-level currency', (o) => (o.currency = 'abc'), /^currency: "abc" is not a known ISO 4217 currency/],
    [
      'bad id characters',
      (o) => (o.id = 'refund/ord 1'),
      /^id: "refund\/ord 1" is not a valid operation id; use 1-200 characters/,
    ],
    ['id with a non-ASCII letter', (o) => (o.id = 'rëfund'), /^id: /],
    ['empty id', (o) => (o.id = ''), /^id: "" is not a valid operation id/],
    ['missing id', (o) => delete o.id, /^id: undefined is not a valid operation id/],
    ['id over 200 characters', (o) => (o.id = 'a'.repeat(201)), /^id: "a{201}" is not a valid operation id; use 1-200/],
    ['unknown field', (o) => (o.amout = 5), /^amout: unknown field; known fields: id, provider/],
    ['missing payload', (o) => delete o.payload, /^payload: required, a JSON object/],
    ['payload that is an array', (o) => (o.payload = [1]), /^payload: required, a JSON object/],
    ['bad action', (o) => (o.action = 'Refund Now'), /^action: required/],
    ['subject that is not an object', (o) => (o.subject = 'cus_1'), /^subject: must be a JSON object/],
    [
      'amount disagreeing with payload.amount',
      (o) => (o.amount = 1000),
      /^amount: 1000 disagrees with payload\.amount 1999/,
    ],
    [
      'currency disagreeing with payload.currency',
      (o) => (o.currency = 'eur'),
      /^currency: eur disagrees with payload\.currency usd/,
    ],
    ['empty client_reference', (o) => (o.client_reference = ''), /^client_reference: must be a non-empty string/],
    [
      'idempotency key over 255 characters',
      (o) => (o.idempotency_key = 'k'.repeat(256)),
      /^idempotency_key: must be a string of 1-255/,
    ],
  ])('%s', (_name, mutate, message) => {
    const op = good();
    mutate(op);
    expect(usageError(() => validateOperation(op, PROVIDERS)).message).toMatch(message);
  });

  it('accepts an id of exactly 200 characters of every allowed class', () => {
    const id = 'Az09._:-'.repeat(25).slice(0, 200);
    expect(validateOperation({ ...good(), id }, PROVIDERS).id).toBe(id);
  });

  it('refuses a payload over 64 KiB and accepts one just under', () => {
    const big = { ...good(), payload: { amount: 1, note: 'x'.repeat(MAX_PAYLOAD_BYTES) } };
    expect(usageError(() => validateOperation(big, PROVIDERS)).message).toMatch(
      /^payload: \d+ bytes is over the 64 KiB limit/,
    );
    const fits = { ...good(), payload: { note: 'x'.repeat(MAX_PAYLOAD_BYTES - 20) } };
    expect(Buffer.byteLength(JSON.stringify(fits.payload))).toBeLessThanOrEqual(MAX_PAYLOAD_BYTES);
    expect(validateOperation(fits, PROVIDERS).payload).toBe(fits.payload);
  });

  it('counts payload size in bytes, not characters', () => {
    // 'é' is two bytes in UTF-8: 40,000 of them are 80,000 bytes, over the limit, while 40,000 chars would fit.
    const op = { ...good(), payload: { note: 'é'.repeat(40_000) } };
    expect(usageError(() => validateOperation(op, PROVIDERS)).message).toMatch(/^payload: /);
  });

  it('refuses a payload nested 5,000 deep naming the depth limit, without overflowing the stack; 32 levels are accepted', () => {
    let deep: Record<string, unknown> = { end: true };
    for (let i = 0; i < 5000; i++) deep = { a: deep };
    expect(() => validateOperation({ ...good(), payload: { ...good().payload, deep } }, PROVIDERS)).toThrow(
      /^payload\.deep(\.a)*: nested more than 32 levels deep/,
    );
    let ok: Record<string, unknown> = {};
    for (let i = 0; i < 30; i++) ok = { a: ok }; // with the payload itself: 32 levels
    expect(validateOperation({ ...good(), payload: { ...good().payload, ok } }, PROVIDERS).payload.ok).toBe(ok);
  });

  it('refuses a lone UTF-16 surrogate in the payload or subject, naming the field', () => {
    const lone = { ...good(), payload: { ...good().payload, metadata: { note: 'a \uD83D b' } } };
    expect(() => validateOperation(lone, PROVIDERS)).toThrow(
      /^payload\.metadata\.note: contains a lone UTF-16 surrogate/,
    );
    const subject = { ...good(), subject: { customer: '\uDC00' } };
    expect(() => validateOperation(subject, PROVIDERS)).toThrow(/^subject\.customer: contains a lone UTF-16 surrogate/);
    // A whole pair is a character like any other.
    const pair = { ...good(), payload: { ...good().payload, metadata: { note: 'ok \uD83D\uDE00' } } };
    expect(validateOperation(pair, PROVIDERS).payload).toEqual(pair.payload);
  });

  it('refuses recon_* keys in payload.metadata: they are recon’s own', () => {
    const forged = { ...good(), payload: { ...good().payload, metadata: { recon_client_reference: 'ord_OTHER' } } };
    expect(() => validateOperation(forged, PROVIDERS)).toThrow(UsageError);
    expect(() => validateOperation(forged, PROVIDERS)).toThrow(
      /^payload\.metadata\.recon_client_reference: recon_\* metadata keys are recon's own/,
    );
  });

  it('prefixes the record position in a batch', () => {
    const op = { ...good(), payload: { amount: -3 } };
    expect(usageError(() => validateOperation(op, PROVIDERS, 'ops.json[2]: ')).message).toMatch(
      /^ops\.json\[2\]: payload\.amount: /,
    );
  });

  it('says no provider is configured when there is none', () => {
    expect(usageError(() => validateOperation(good(), [])).message).toMatch(
      /^provider: unknown provider "stripe"; configured: none/,
    );
  });

  it.each([null, 42, 'text', [good()]])('refuses %j as not an object', (raw) => {
    expect(usageError(() => validateOperation(raw, PROVIDERS)).message).toMatch(/an operation must be a JSON object/);
  });

  it('validateId names the field it was given', () => {
    expect(usageError(() => validateId('a b', 'ID')).message).toMatch(/^ID: /);
    expect(validateId('ok:1')).toBe('ok:1');
  });

  it('knows ISO 4217 currencies in either case', () => {
    expect(isCurrency('usd')).toBe(true);
    expect(isCurrency('JPY')).toBe(true);
    expect(isCurrency('xyz')).toBe(false);
  });
});

describe('parseOperationsText: a JSON object, an array, or NDJSON lines', () => {
  const a = { id: 'a', provider: 'stripe' };
  const b = { id: 'b', provider: 'stripe' };

  it('parses one object', () => {
    expect(parseOperationsText(JSON.stringify(a), 'stdin')).toEqual([a]);
  });

  it('parses one pretty-printed object spanning several lines', () => {
    expect(parseOperationsText(JSON.stringify(a, null, 2), 'stdin')).toEqual([a]);
  });

  it('parses a pretty-printed object whose inner lines start with "{"', () => {
    const nested = { id: 'a', payload: { x: 1 } };
    const text = '{\n"id": "a",\n"payload":\n{"x": 1}\n}';
    expect(parseOperationsText(text, 'stdin')).toEqual([nested]);
  });

  it('parses an array', () => {
    expect(parseOperationsText(JSON.stringify([a, b], null, 2), 'stdin')).toEqual([a, b]);
  });

  it('parses NDJSON, skipping blank lines and CRLF endings', () => {
    expect(parseOperationsText(`${JSON.stringify(a)}\r\n\r\n${JSON.stringify(b)}\r\n`, 'stdin')).toEqual([a, b]);
  });

  it('names the line of a malformed NDJSON record', () => {
    const text = `${JSON.stringify(a)}\n${JSON.stringify(b)}\n{"id": "c",\n`;
    expect(usageError(() => parseOperationsText(text, 'ops.ndjson')).message).toMatch(
      /^ops\.ndjson: line 3: malformed JSON/,
    );
  });

  it('names the line of an NDJSON record that is not JSON at all', () => {
    const text = `${JSON.stringify(a)}\nnot json\n${JSON.stringify(b)}`;
    expect(usageError(() => parseOperationsText(text, 'ops.ndjson')).message).toMatch(
      /^ops\.ndjson: line 2: malformed JSON/,
    );
  });

  it('reports malformed JSON of one document on one line, even when the input spans several', () => {
    const err = usageError(() => parseOperationsText('{\n  "id": "a",\n  "provider": \n}', 'ops.json'));
    expect(err.message).toMatch(/^ops\.json: malformed JSON/);
    expect(err.message).toMatch(/record again$/);
  });

  it('reports a malformed array', () => {
    expect(usageError(() => parseOperationsText('[{"id": "a"},', 'stdin')).message).toMatch(/^stdin: malformed JSON/);
  });

  it('keeps the message short when the malformed input is huge', () => {
    const err = usageError(() => parseOperationsText('{"id": "' + 'x'.repeat(100_000), 'stdin'));
    expect(err.message.length).toBeLessThan(1000);
  });

  it.each(['', '   \n\n  '])('refuses empty input %j', (text) => {
    expect(usageError(() => parseOperationsText(text, 'stdin')).message).toMatch(/^stdin: no operations in input/);
  });
});
