/**
 * Provider payload validation when an operation is recorded (issue 10): each provider type checks
 * that it could send the action and payload, so `ops record` refuses (exit 2, nothing written)
 * what `ops submit` could never send. The same checks run again in every attempt's claim
 * (Provider.validatePayload), one function per type for both.
 */
import { UsageError } from '../errors.js';
import type { LoadedConfig } from '../config/types.js';
import type { OperationInput } from '../core/intake/validate.js';
import type { SubmitRequest } from '../types.js';
import { createProvider } from './index.js';

type Check = (req: SubmitRequest) => void;

async function checkFor(name: string, loaded: LoadedConfig): Promise<Check | null> {
  // A provider configured without its secrets here cannot be built; it is checked at submit.
  if (!Object.hasOwn(loaded.providers, name)) return null;
  const config = loaded.providers[name];
  switch (config.type) {
    case 'stripe': {
      // Not the adapter itself: recording need not load stripe-node.
      const { refundParams } = await import('./stripe/payload.js');
      return (req) => void refundParams(req, `providers.${name}`);
    }
    case 'http': {
      const { validateHttpRequest } = await import('./http/index.js');
      return (req) => validateHttpRequest(config, req);
    }
    case 'module': {
      const provider = await createProvider(name, loaded);
      return (req) => provider.validatePayload?.(req);
    }
  }
}

/**
 * Throws UsageError for the first input its provider could not send. `where[i]` prefixes the
 * message of input i (e.g. "stdin[3]: ") so a batch error points at its record.
 */
export async function validatePayloads(
  loaded: LoadedConfig,
  inputs: OperationInput[],
  where: (i: number) => string = () => '',
): Promise<void> {
  const checks = new Map<string, Check | null>();
  for (const [i, input] of inputs.entries()) {
    if (!checks.has(input.provider)) checks.set(input.provider, await checkFor(input.provider, loaded));
    const check = checks.get(input.provider);
    try {
      check?.({
        operation_id: input.id,
        action: input.action,
        payload: input.payload,
        idempotency_key: input.idempotency_key,
        client_reference: input.client_reference,
      });
    } catch (err) {
      if (err instanceof UsageError) throw new UsageError(`${where(i)}${err.message}`, { cause: err });
      throw err;
    }
  }
}
