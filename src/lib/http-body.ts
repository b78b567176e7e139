/**
 * Reading an HTTP request body, once for every server recon runs (`webhook serve`, `mcp --http`,
 * the sandboxes): at most `maxBytes`, arrived whole within `timeoutMs`. The errors are typed so a
 * caller answers 413 (BodyTooLarge) or 408 (BodyTimeout) and closes the connection rather than let
 * Node drain what the client keeps sending.
 */
import type { IncomingMessage } from 'node:http';

export class BodyTooLarge extends Error {
  constructor(readonly maxBytes: number) {
    super(`request body over ${maxBytes} bytes`);
  }
}

export class BodyTimeout extends Error {
  constructor(readonly timeoutMs: number) {
    super(`request body not received within ${timeoutMs} ms`);
  }
}

/** The client closed the connection (or it failed) before the body was complete. */
export class BodyAborted extends Error {}

export interface ReadBodyLimits {
  maxBytes: number;
  timeoutMs: number;
}

/**
 * The request body as UTF-8 text. An announced Content-Length over the cap is refused before a
 * byte is read; a body that grows past it is refused as soon as it does (the bytes past the cap
 * are never kept); a client that sends its headers and then trickles or withholds the body gets
 * BodyTimeout `timeoutMs` after the call instead of holding the request open.
 */
export function readBody(req: IncomingMessage, { maxBytes, timeoutMs }: ReadBodyLimits): Promise<string> {
  const announced = Number(req.headers['content-length']);
  if (Number.isFinite(announced) && announced > maxBytes) return Promise.reject(new BodyTooLarge(maxBytes));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (err: Error | undefined) => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
      if (err) {
        req.pause();
        reject(err);
      } else resolve(Buffer.concat(chunks).toString('utf8'));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) done(new BodyTooLarge(maxBytes));
      else chunks.push(chunk);
    };
    const onEnd = () => done(undefined);
    const onError = (err: Error) =>
      done(new BodyAborted(`the request failed before its body was complete: ${err.message}`));
    const onAborted = () => done(new BodyAborted('the client closed the connection before the body was complete'));
    const timer = setTimeout(() => done(new BodyTimeout(timeoutMs)), timeoutMs);
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
  });
}
