/**
 * vitest `setupFiles` entry (vitest.config.ts): evaluated before each test file, isolated or not,
 * so this `afterAll` is registered for every file. Being registered first, it runs after the
 * file's own `afterAll` hooks (vitest runs them last-registered first).
 */
import { afterAll } from 'vitest';
import { runFileEnd } from './file-end.js';

afterAll(runFileEnd);
