// The `digest(…)` / `lockKey(…)` examples of the documents give what their comments say, and every `unique-jobs`
// synopsis in them (`locks list|show|release`, `reap [--dry-run]`) names commands and options the CLI has. No Redis.
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from '@jest/globals';
import { digest, lockKey, type LockKeyInput } from '../../lib/index.js';
import { USAGE } from '../../lib/ops/cli/usage.js';
import { cliExamples, digestExamples, documents, matchesShown } from './doc-examples.js';

describe('digest and lockKey examples in the docs', () => {
  const examples = documents().flatMap(digestExamples);

  it('finds them (docs/uniqueness-arguments.md has five)', () => {
    expect(examples.filter((e) => e.where.startsWith('docs/uniqueness-arguments.md')).length).toBeGreaterThanOrEqual(5);
  });

  it('each gives the result its comment shows', () => {
    const wrong = examples.flatMap((example) => {
      // The argument is plain data (strings, numbers, arrays): evaluated as written, then copied into this realm.
      const input = JSON.parse(JSON.stringify(runInNewContext(`(${example.argument})`))) as LockKeyInput;
      const actual = example.fn === 'digest' ? digest(input) : lockKey(input);
      return matchesShown(example.expected, actual)
        ? []
        : [
            `${example.where}: ${example.fn}(${example.argument}) is '${actual}', the document says '${example.expected}'`,
          ];
    });
    expect(wrong).toEqual([]);
  });
});

describe('unique-jobs synopses in the docs', () => {
  const synopses = documents()
    .flatMap(cliExamples)
    .filter((example) => example.kind === 'synopsis');

  it('name only commands, subcommands and options of the usage text', () => {
    expect(synopses.map((example) => example.where.split(':')[0])).toEqual(
      expect.arrayContaining(['README.md', 'docs/reliability.md']),
    );
    const unknown = synopses.flatMap((example) => {
      const words = example.command
        .replace(/\s+#.*$/, '')
        .replace(/^npx\s+/, '')
        .replace(/<[^>]*>/g, ' ')
        .split(/[\s|[\]]+/)
        .filter((word) => word !== '' && word !== 'unique-jobs');
      return words
        .filter(
          (word) =>
            !new RegExp(`(^|[^\\w-])${word.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}($|[^\\w-])`, 'm').test(USAGE),
        )
        .map((word) => `${example.where}: "${word}" (in \`${example.command}\`) is not in the usage text`);
    });
    expect(unknown).toEqual([]);
  });
});
