/** `${ENV}` substitution in every string of the config file (SPEC §6). */
import { UsageError } from '../errors.js';
import { registerSecret, SECRET_ENV_NAME } from './redact.js';
import { dict } from '../lib/dict.js';

const REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

export type Env = Record<string, string | undefined>;

/**
 * Returns a copy of `value` with `${NAME}` replaced from `env` in every string (object keys are
 * left alone). A variable that is not set is an error naming the key path: an empty API key sent
 * to a provider fails far from its cause.
 */
export function substituteEnv(value: unknown, path: string, env: Env): unknown {
  if (typeof value === 'string') return substituteString(value, path, env);
  if (Array.isArray(value)) return value.map((item, i) => substituteEnv(item, `${path}[${i}]`, env));
  if (value !== null && typeof value === 'object') {
    const out = dict<unknown>();
    for (const [key, item] of Object.entries(value)) {
      // Comment keys ("//", "$comment"; see isCommentKey in read.ts) are ignored by the loader, and
      // may mention `${VAR}` as prose: the config `recon init` writes does.
      out[key] = key.startsWith('//') || key === '$comment' ? item : substituteEnv(item, joinPath(path, key), env);
    }
    return out;
  }
  return value;
}

function substituteString(text: string, path: string, env: Env): string {
  return text.replace(REFERENCE, (_match, name: string) => {
    const found = env[name];
    if (found === undefined) {
      throw new UsageError(
        `${path}: environment variable ${name} is not set; export it or write the value in the config file`,
      );
    }
    if (SECRET_ENV_NAME.test(name)) registerSecret(found);
    return found;
  });
}

export function joinPath(path: string, key: string): string {
  const segment = /^[A-Za-z_$][A-Za-z0-9_$-]*$/.test(key) ? key : JSON.stringify(key);
  return path === '' ? segment : /^[A-Za-z_$]/.test(segment) ? `${path}.${segment}` : `${path}[${segment}]`;
}
