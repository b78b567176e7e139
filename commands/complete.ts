/**
 * `recon __complete providers [--config FILE]`: what the completion scripts of `recon completion`
 * call at TAB for a value only the user's configuration knows (`--provider <TAB>`). Hidden: not a
 * commander command, so neither `--help` nor the completion script lists it; bin/recon answers it
 * before loading commander, and it loads the config loader and nothing else (no store).
 *
 * At a TAB nothing may go wrong: on any failure (no config, a bad or untrusted file, an unknown
 * word) it prints nothing and exits 0, and it never waits long.
 */

/** How long a TAB may wait for the config (a file on a hung network mount): then nothing. */
const DEADLINE_MS = 2000;

/** The words to offer for `what`, one per line; [] on any failure. */
export async function completionWords(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
  cwd: string = process.cwd(),
): Promise<string[]> {
  try {
    const [what, ...rest] = args;
    if (what !== 'providers') return [];
    let flag: string | undefined;
    for (let i = 0; i < rest.length; i++) {
      if (rest[i] === '--config') flag = rest[++i];
      else if (rest[i].startsWith('--config=')) flag = rest[i].slice('--config='.length);
    }
    const { loadConfig } = await import('../src/config/load.js');
    const config = await loadConfig({ flag: flag || undefined, env, cwd });
    // A name the shell would split or misread is not offered (config names are plain words anyway).
    return Object.keys(config.providers).filter((n) => /^[\w.:@+-]+$/.test(n));
  } catch {
    return [];
  }
}

/**
 * The answer: the words on stdout, never a word on stderr, exit 0. `deadline`: this process is
 * only this answer (bin/recon), and ends with nothing after DEADLINE_MS.
 */
export async function completeMain(args: string[], o: { deadline?: boolean } = {}): Promise<void> {
  process.exitCode = 0;
  const timer = o.deadline ? setTimeout(() => process.exit(0), DEADLINE_MS) : undefined;
  timer?.unref();
  const words = await completionWords(args);
  clearTimeout(timer);
  if (words.length) process.stdout.write(words.join('\n') + '\n');
}
