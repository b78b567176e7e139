/**
 * `recon --help` (also `-h`, `recon help`) without commander: the top-level help, rendered from the
 * command table exactly as commander renders it, for bin/recon to print. Loading commander (and the
 * `node:child_process` it requires) is most of what start-up costs beyond node itself, and
 * `recon --help` is held to 1.3× `node -e 0` (npm run bench, startup). Every other help — a
 * command's, a group's — is commander's own.
 *
 * The layout is commander 14's Help (lib/help.js: formatHelp, formatItem, boxWrap) with its
 * defaults: no colours, a 2-space indent and spacer, no wrapping when fewer than 40 columns remain.
 * test/unit/help.test.ts compares this text with commander's for the same program at several
 * widths, byte for byte: a change of commander, of the options or of the table that the two would
 * render differently fails there. It renders what the table holds today (a non-empty description
 * and closing text, no `-h`/`--help`/`help` of our own, no colour codes, boolean defaults on
 * non-negated flags only); commander's hidden commands, aliases, help groups and sorting are not
 * modelled, and a table that needs them fails that test.
 */
import { COMMANDS, PROGRAM } from '../index.js';

interface Item {
  term: string;
  description: string;
}

/** What commander adds itself: its version option (as bin/main.ts names it), its help option and help command. */
const VERSION: Item = { term: '-V, --version', description: 'output the version number' };
const HELP_OPTION: Item = { term: '-h, --help', description: 'display help for command' };
const HELP_COMMAND: Item = { term: 'help [command]', description: 'display help for command' };

/** Below this many columns for a description, commander does not wrap it (Help.minWidthToWrap). */
const MIN_WIDTH_TO_WRAP = 40;

/** commander's boxWrap: wrap at whitespace to `width`, keeping existing line breaks. */
function wrap(text: string, width: number): string {
  if (width < MIN_WIDTH_TO_WRAP) return text;
  const lines: string[] = [];
  for (const line of text.split(/\r\n|\n/)) {
    const chunks = line.match(/\s*\S+/g);
    if (chunks === null) {
      lines.push('');
      continue;
    }
    let current = chunks[0];
    for (const chunk of chunks.slice(1)) {
      if (current.length + chunk.length <= width) current += chunk;
      else {
        lines.push(current);
        current = chunk.trimStart();
      }
    }
    lines.push(current);
  }
  return lines.join('\n');
}

/** commander's formatItem: the term padded to `termWidth`, the description wrapped beside it. */
function item({ term, description }: Item, termWidth: number, width: number): string {
  if (!description) return `  ${term}`;
  const remaining = width - termWidth - 4;
  // A description with a line break followed by indentation is preformatted: left as it is.
  const text =
    remaining < MIN_WIDTH_TO_WRAP || /\n[^\S\r\n]/.test(description)
      ? description
      : wrap(description, remaining).replace(/\n/g, '\n' + ' '.repeat(termWidth + 2));
  return `  ${term.padEnd(termWidth)}  ${text.replace(/\n/g, '\n  ')}`;
}

/** The top-level help for a terminal `width` columns wide (commander's default, 80, when not a terminal). */
export function programHelp(width = 80): string {
  const options: Item[] = [
    VERSION,
    ...PROGRAM.options.map((o) => ({
      term: o.flags,
      // commander shows a boolean option's boolean default.
      description: o.default === undefined ? o.description : `${o.description} (default: ${o.default})`,
    })),
    HELP_OPTION,
  ];
  // A command group is listed by its name, as commander lists a command with no options or arguments.
  const commands: Item[] = [
    ...COMMANDS.map((c) => ({ term: 'commands' in c ? c.name : c.usage, description: c.description })),
    HELP_COMMAND,
  ];
  const termWidth = Math.max(...[...options, ...commands].map((i) => i.term.length));
  return [
    'Usage: recon [options] [command]',
    '',
    wrap(PROGRAM.description, width),
    '',
    'Options:',
    ...options.map((o) => item(o, termWidth, width)),
    '',
    'Commands:',
    ...commands.map((c) => item(c, termWidth, width)),
    '',
  ]
    .join('\n')
    .concat(PROGRAM.after, '\n');
}
