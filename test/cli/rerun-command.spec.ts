// The command a "Found elsewhere" answer prints to run again (lib/ops/cli/rerun-command.ts): the command line as parsed,
// with the option that finds the thing set, words the shell would read otherwise quoted, and --redis' password masked.
import { describe, expect, it } from '@jest/globals';
import { parseCliArgs } from '../../lib/ops/cli/args.js';
import { rerunCommand } from '../../lib/ops/cli/rerun-command.js';

const rerun = (argv: string[], option: 'prefix' | 'bull-prefix', value: string) =>
  rerunCommand(parseCliArgs(argv), option, value);

describe('rerunCommand', () => {
  it('sets the option in place of the one given, or adds it, keeping the other options', () => {
    expect(rerun(['locks', 'show', 'v1:ab', '--prefix', 'wrong', '--json'], 'prefix', 'myapp')).toBe(
      'unique-jobs locks show v1:ab --prefix myapp --json',
    );
    expect(rerun(['locks', 'list', '--queue=emails', '--yes'], 'bull-prefix', 'bullmq')).toBe(
      'unique-jobs locks list --queue emails --yes --bull-prefix bullmq',
    );
  });

  it('quotes what the shell would read otherwise: spaces, quotes, braces, $, globs', () => {
    expect(rerun(['dead', 'list'], 'bull-prefix', '{bull}')).toBe("unique-jobs dead list --bull-prefix '{bull}'");
    expect(rerun(['locks', 'list', '--queue', "o'clock $HOME *"], 'prefix', '{a}')).toBe(
      `unique-jobs locks list --queue 'o'\\''clock $HOME *' --prefix '{a}'`,
    );
  });

  it("masks --redis' password, keeps the rest of the URL", () => {
    expect(rerun(['reap', '--redis', 'redis://app:s3cret@db.internal:6380/2'], 'prefix', 'p')).toBe(
      "unique-jobs reap --redis 'redis://app:***@db.internal:6380/2' --prefix p",
    );
    expect(rerun(['reap', '--redis', 'rediss://:s3cret@db.internal'], 'prefix', 'p')).toBe(
      "unique-jobs reap --redis 'rediss://:***@db.internal' --prefix p",
    );
    expect(rerun(['reap', '--redis', 'redis://db.internal:6379'], 'prefix', 'p')).toBe(
      'unique-jobs reap --redis redis://db.internal:6379 --prefix p',
    );
  });

  // Found by a hostile review (session wt-3): both URLs log in (ioredis reads a `password` query parameter, and takes
  // the last `@` of the authority as the end of the password), yet the printed command showed the password, or its end.
  it("masks a password holding '@' whole, and a password given as a query parameter", () => {
    expect(rerun(['reap', '--redis', 'redis://app:p@ss@db.internal:6380/2'], 'prefix', 'p')).toBe(
      "unique-jobs reap --redis 'redis://app:***@db.internal:6380/2' --prefix p",
    );
    expect(rerun(['reap', '--redis', 'redis://db.internal/0?password=s3cret&db=1'], 'prefix', 'p')).toBe(
      "unique-jobs reap --redis 'redis://db.internal/0?password=***&db=1' --prefix p",
    );
    expect(rerun(['reap', '--redis', 'redis://app:a@b@db.internal?Password=s3cret'], 'prefix', 'p')).toBe(
      "unique-jobs reap --redis 'redis://app:***@db.internal?Password=***' --prefix p",
    );
    // An `@` after the authority is not a password's end.
    expect(rerun(['reap', '--redis', 'redis://db.internal/0?x=a@b'], 'prefix', 'p')).toBe(
      "unique-jobs reap --redis 'redis://db.internal/0?x=a@b' --prefix p",
    );
  });
  // Found by a hostile review (session wt-4): the CLI reads --redis with the WHATWG URL parser, which drops leading and
  // trailing spaces and every tab or newline, and ioredis reads the query with URLSearchParams, which decodes names:
  // each of these logs in with the password, and the printed command showed it.
  it('masks the password of a URL as the parsers read it: spaces around it, tabs or newlines in it, encoded names', () => {
    expect(rerun(['reap', '--redis', ' redis://app:s3cret@db.internal'], 'prefix', 'p')).toBe(
      "unique-jobs reap --redis 'redis://app:***@db.internal' --prefix p",
    );
    expect(rerun(['reap', '--redis', 'redis://db.internal?pass\tword=s3cret'], 'prefix', 'p')).toBe(
      "unique-jobs reap --redis 'redis://db.internal?password=***' --prefix p",
    );
    expect(rerun(['reap', '--redis', 'redis://db.internal?pass%77ord=s3cret&db=1'], 'prefix', 'p')).toBe(
      "unique-jobs reap --redis 'redis://db.internal?pass%77ord=***&db=1' --prefix p",
    );
  });
  // Found by a hostile review (session wt-4): `keys show -- -5` (a key starting with '-', given after `--`) printed
  // `unique-jobs keys show -5 …`, which the CLI refuses (Unknown option '-5').
  it("puts positionals after '--' when one starts with '-', so the printed command parses back", () => {
    const printed = rerun(['keys', 'show', '--scope', 's', '--', '-5'], 'prefix', 'p');
    expect(printed).toBe('unique-jobs --scope s --prefix p -- keys show -5');
    expect(parseCliArgs(printed!.split(' ').slice(1))).toEqual(
      parseCliArgs(['keys', 'show', '--scope', 's', '--prefix', 'p', '--', '-5']),
    );
  });

  it('prints no command for a prefix found in Redis that the CLI would refuse as --prefix', () => {
    expect(rerun(['dead', 'list'], 'prefix', 'my app')).toBeUndefined();
    expect(rerun(['dead', 'list'], 'bull-prefix', 'x'.repeat(101))).toBeUndefined();
    expect(rerun(['dead', 'list'], 'bull-prefix', 'x'.repeat(100))).toBe(
      `unique-jobs dead list --bull-prefix ${'x'.repeat(100)}`,
    );
  });
});
