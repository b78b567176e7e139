/**
 * commander, required as the CommonJS package it is: `import { … } from 'commander'` reaches the
 * same module through its ESM wrapper (esm.mjs) and a parse of its entry for export names, ~5 ms of
 * every start (npm run bench, startup). Every use of commander's values goes through here; its types
 * are imported as types (`import type { Command } from 'commander'`).
 */
import { createRequire } from 'node:module';

const commander = createRequire(import.meta.url)('commander') as typeof import('commander');

export const { Argument, Command, CommanderError, InvalidArgumentError, Option } = commander;
