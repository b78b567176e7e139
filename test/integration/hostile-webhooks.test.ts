/**
 * Issue 10, Hostile input: `recon webhook serve` faces the internet. An unauthenticated body is
 * capped (1 MiB → 413, refused before it is read whole), a slow body times out, a provider name
 * that is a prototype key is just an unknown provider (404), and no internal error text reaches a
 * client.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, removeTempStores } from '../support/backends.js';
import { collect, type CliResult } from '../support/cli.js';
import { startWorld, type World } from '../support/world.js';
import { sleep } from './incidents-support.js';

const backend = backends.find((b) => b.name === 'postgres') ?? backends[0];

let world: World;
let port: number;
let server: ReturnType<World['spawn']>;
let exited: Promise<CliResult>;
let stderr = '';

/** Sends raw bytes and returns the status line's code (or 'closed' when the server hung up without one). */
function rawRequest(
  head: string,
  body: (socket: net.Socket) => Promise<void>,
  waitMs = 15_000,
): Promise<{ status: number | 'closed'; text: string }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    const done = () => {
      const m = /^HTTP\/1\.1 (\d{3})/.exec(text);
      resolve({ status: m ? Number(m[1]) : 'closed', text });
    };
    const timer = setTimeout(() => {
      socket.destroy();
      done();
    }, waitMs);
    socket.on('data', (d: Buffer) => (text += d.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      done();
    });
    socket.on('connect', () => {
      socket.write(head);
      body(socket).catch(() => undefined);
    });
  });
}

beforeAll(async () => {
  world = await startWorld({ backend });
  // Port 0: the server takes a free port and prints it (no port picked here and taken meanwhile).
  server = world.spawn(['webhook', 'serve', '--port', '0', '--provider', 'stripe', '--body-timeout', '1s']);
  exited = collect(server);
  server.stderr!.on('data', (d) => (stderr += d));
  for (let i = 0; i < 600 && !stderr.includes('listening on'); i++) await sleep(25);
  expect(stderr).toContain('listening on');
  port = Number(/listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr)?.[1]);
});

afterAll(async () => {
  server?.kill('SIGTERM');
  await exited;
  await world?.close();
  removeTempStores();
});

describe('webhook serve against hostile requests', () => {
  it('a body over 1 MiB announced by Content-Length gets 413 at once, before it is sent', async () => {
    const r = await rawRequest(
      `POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${300 * 1024 * 1024}\r\n\r\n`,
      async (s) => {
        s.write('{"a":"');
      },
    );
    expect(r.status).toBe(413);
  });

  it('a chunked body that grows past 1 MiB gets 413 and is not read whole', async () => {
    const chunk = 'x'.repeat(64 * 1024);
    let sent = 0;
    const r = await rawRequest(
      'POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n',
      async (s) => {
        // Up to 8 MiB, unless the server answers and closes first.
        for (let i = 0; i < 128 && !s.destroyed; i++) {
          s.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
          sent += chunk.length;
          await sleep(2);
        }
      },
    );
    expect(r.status).toBe(413);
    expect(sent).toBeLessThan(8 * 1024 * 1024);
  });

  it('a body that trickles in slower than the body timeout gets 408', async () => {
    let written = 0;
    const r = await rawRequest(
      'POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n',
      async (s) => {
        for (let i = 0; i < 40 && !s.destroyed; i++) {
          s.write('x');
          written++;
          await sleep(250);
        }
      },
    );
    expect(r.status).toBe(408);
    // The server answered and closed before the 40 bytes (10 s of trickle) were all sent.
    expect(written).toBeLessThan(40);
  });

  it.each(['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'nope'])(
    '/webhooks/%s is an unknown provider: 404, with no internal error text',
    async (name) => {
      const res = await fetch(`http://127.0.0.1:${port}/webhooks/${name}`, {
        method: 'POST',
        body: '{}',
        headers: { 'content-type': 'application/json' },
      });
      expect(res.status).toBe(404);
      const text = await res.text();
      expect(text).not.toMatch(/TypeError|is not a function|Cannot read|undefined|at \//);
      expect(JSON.parse(text)).toEqual({ error: 'unknown provider' });
    },
  );

  it('an unexpected failure answers 500 with a fixed text, never the internal message', async () => {
    // A signed body that is not a Stripe event object: the adapter fails past the signature check.
    const body = JSON.stringify(['not', 'an', 'event']);
    const res = await fetch(`http://127.0.0.1:${port}/webhooks/stripe`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', 'stripe-signature': world.stripe.signPayload(body) },
    });
    const text = await res.text();
    expect([400, 500]).toContain(res.status);
    if (res.status === 500) expect(JSON.parse(text)).toEqual({ error: 'internal error' });
    expect(text).not.toMatch(/TypeError|Cannot read|undefined|relation|column|at \//);
  });

  it('a genuine signed event refused as too slow (408, connection closed) or too large (413) is not recorded', async () => {
    const pi = world.stripe.seedPaymentIntent({ amount: 1000, currency: 'usd' });
    const refund = world.stripe.seedRefund({ payment_intent: pi.payment_intent, amount: 100, currency: 'usd' });
    const event = world.stripe.eventFor('refund.updated', refund);
    const body = JSON.stringify(event);
    const head = (length: number, signature: string) =>
      `POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nStripe-Signature: ${signature}\r\nContent-Length: ${length}\r\n\r\n`;
    // All but the last byte at once, then nothing: the body never completes within --body-timeout.
    const slow = await rawRequest(head(Buffer.byteLength(body), world.stripe.signPayload(body)), async (s) => {
      s.write(body.slice(0, -1));
    });
    expect(slow.status).toBe(408);
    // rawRequest resolves on 'close' or after 15 s; a closed connection is what ended it here.
    expect(slow.text).toMatch(/connection: close/i);
    // The same event padded past 1 MiB (still valid JSON, validly signed).
    const big = body.slice(0, -1) + ' '.repeat(1024 * 1024) + '}';
    const large = await rawRequest(head(Buffer.byteLength(big), world.stripe.signPayload(big)), async (s) => {
      // The start only: the announced length is refused before the rest would be read.
      s.write(big.slice(0, 1000));
    });
    expect(large.status).toBe(413);
    // Delivered whole now, the event is new to recon: neither refused request recorded it.
    const res = await fetch(`http://127.0.0.1:${port}/webhooks/stripe`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', 'stripe-signature': world.stripe.signPayload(body) },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ event_id: event.id, duplicate: false });
  });

  it('the server is still up and answers a genuine delivery', async () => {
    const pi = world.stripe.seedPaymentIntent({ amount: 1000, currency: 'usd' });
    const refund = world.stripe.seedRefund({ payment_intent: pi.payment_intent, amount: 100, currency: 'usd' });
    const event = world.stripe.eventFor('refund.updated', refund);
    expect(await world.stripe.deliverWebhook(`http://127.0.0.1:${port}/webhooks/stripe`, event, 1)).toEqual([200]);
  });
});
