import type { CliArgs } from './args.js';

/** A word the shell passes as it is (no quoting needed); braces and commas excluded (brace expansion). */
const PLAIN_WORD = /^[\w@%+=:./-]+$/;

/** `word`, or `'word'` when the shell would read it otherwise. */
function shellWord(word: string): string {
  return PLAIN_WORD.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * `redis://user:***@host:6379`: a URL's password masked (a command printed back may end up in a log), wherever ioredis
 * reads one: in the user info, which ends at the authority's last `@` (a password may hold `@`), and in a `password`
 * query parameter.
 */
function maskedUrl(text: string): string {
  return text
    .replace(/^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)@/i, (_, scheme: string, userInfo: string) => {
      const colon = userInfo.indexOf(':');
      return `${scheme}${colon === -1 ? userInfo : `${userInfo.slice(0, colon)}:***`}@`;
    })
    .replace(/([?&]password=)[^&#]*/gi, '$1***');
}

/**
 * The command line that ran, as `unique-jobs` and its parsed arguments, with `option` set to `value` (a ready command
 * to run again where the thing looked for was found). The password of `--redis` is masked as `***`.
 */
export function rerunCommand(args: CliArgs, option: 'prefix' | 'bull-prefix', value: string): string {
  const words = ['unique-jobs', ...args.positionals];
  const values: Record<string, string | boolean | undefined> = { ...args.values, [option]: value };
  for (const [name, given] of Object.entries(values)) {
    if (given === undefined || given === false) continue;
    words.push(`--${name}`);
    if (typeof given === 'string') words.push(name === 'redis' ? maskedUrl(given) : given);
  }
  return words.map(shellWord).join(' ');
}
