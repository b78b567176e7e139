/**
 * The audit key (SPEC §5 "Keyed chain"): with it, each audit event's hash is an HMAC-SHA-256, so a
 * role that may insert audit rows, and can therefore compute the public sha256 chain, cannot write
 * an event that verifies. The key lives outside the database (RECON_AUDIT_KEY, or the config's
 * `auditKey`); only its id, a one-way derivation, is stored beside each keyed event.
 */
import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';
import { UsageError } from '../errors.js';

/** Shorter keys are refused: an HMAC is only as strong as a key the attacker cannot guess. */
const MIN_AUDIT_KEY_LENGTH = 32;

export interface AuditKey {
  /** A KeyObject: printing or inspecting it never shows the key. */
  readonly key: KeyObject;
  /** 16 hex digits of HMAC(key, "recon audit key id"): names the key in the store and in messages. */
  readonly id: string;
}

/** The key from its text (trailing newline ignored, as `openssl rand -hex 32 > FILE` writes it). */
export function auditKeyFrom(text: string, source: string): AuditKey {
  const secret = text.replace(/\r?\n$/, '');
  if (secret.length < MIN_AUDIT_KEY_LENGTH)
    throw new UsageError(
      `${source}: the audit key is too short (${secret.length} characters); use at least ${MIN_AUDIT_KEY_LENGTH}, e.g. the output of \`openssl rand -hex 32\``,
    );
  const key = createSecretKey(Buffer.from(secret, 'utf8'));
  return { key, id: createHmac('sha256', key).update('recon audit key id').digest('hex').slice(0, 16) };
}

export function hmacHex(key: AuditKey, text: string): string {
  return createHmac('sha256', key.key).update(text, 'utf8').digest('hex');
}
