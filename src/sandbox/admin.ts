/**
 * The `/_sandbox/*` control API shared by both sandboxes, so a sandbox started in another process
 * (`recon sandbox stripe --port N`, the demo, CLI tests) can be steered and its ledger counted.
 * It is not part of any provider's API: no auth, not counted in stats, no latency or faults.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseFault, type SandboxFaults } from './faults.js';
import { readBody, sendJson } from './http.js';

export type AdminHandler = (body: Record<string, unknown>, query: URLSearchParams) => unknown;

export async function handleAdmin(
  req: IncomingMessage,
  res: ServerResponse,
  faults: SandboxFaults,
  extra: Record<string, AdminHandler>,
): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://sandbox');
  const route = `${req.method} ${url.pathname.slice('/_sandbox'.length)}`;
  const handlers: Record<string, AdminHandler> = {
    'POST /faults': (body) => {
      const { times, idempotencyKey, ...fault } = body;
      faults.inject(parseFault(fault), {
        times: times === undefined ? undefined : Number(times),
        // eslint-disable-next-line @typescript-eslint/no-base-to-string -- a query parameter, as String() prints it
        idempotencyKey: idempotencyKey === undefined ? undefined : String(idempotencyKey),
      });
      return { pending: faults.pending() };
    },
    'GET /faults': () => ({ pending: faults.pending(), held: faults.held() }),
    'POST /release': () => {
      const held = faults.held();
      faults.release();
      return { released: held };
    },
    'POST /clear': () => {
      faults.clear();
      return { pending: 0 };
    },
    ...extra,
  };
  const handler = handlers[route];
  if (!handler) {
    sendJson(res, 404, { error: { type: 'invalid_request_error', message: `Unknown sandbox route ${route}` } });
    return;
  }
  try {
    const text = await readBody(req);
    const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    sendJson(res, 200, handler(body, url.searchParams));
  } catch (err) {
    sendJson(res, 400, { error: { type: 'invalid_request_error', message: (err as Error).message } });
  }
}
