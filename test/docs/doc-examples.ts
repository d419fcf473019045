// Finds the examples in the Markdown documents (README.md, docs/*.md) that the docs tests run: every `unique-jobs`
// command (in shell code blocks, with the output shown after a `$ ` line, and in inline code spans of the prose), and
// the `digest(…)` / `lockKey(…)` calls of TypeScript blocks followed by a `// '<result>'` comment.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root. */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** README.md and every docs/*.md, as paths relative to the root. */
export function documents(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}

/** Reads a document (relative to the root). */
export function readDocument(file: string): string {
  return readFileSync(join(ROOT, file), 'utf8');
}

/** A `unique-jobs` command found in a document. */
export interface CliExample {
  /** Where: `docs/operations.md:36`. */
  where: string;
  /** The command line as written (`npx unique-jobs …`, a trailing `# comment` included). */
  command: string;
  /** The output the document shows for it (the lines after a `$ ` command line), if any. */
  expected?: string[];
  /**
   * The block or paragraph it belongs to (`docs/operations.md:35`): the commands of one group run in order, against one
   * state, as a reader following them would.
   */
  group: string;
  /**
   * `run`: a command to run. `synopsis`: a summary of several commands (`locks list|show|release`,
   * `reap [--dry-run]`, `<queue>` placeholders), checked against the usage text. `mention`: the bare program name.
   */
  kind: 'run' | 'synopsis' | 'mention';
}

/** Placeholders the docs tests fill in (a digest, a dead-set entry's ID); any other `<…>` makes a synopsis. */
const FILLED = new Set(['<digest>', '<id>']);
const INVOCATION = /^(?:npx\s+)?unique-jobs(?:\s|$)/;
const SHELL = new Set(['', 'sh', 'bash', 'shell', 'console']);

function classify(command: string): CliExample['kind'] {
  const words = command
    .replace(/\s+#.*$/, '')
    .trim()
    .split(/\s+/);
  if (words.length <= (words[0] === 'npx' ? 2 : 1)) return 'mention';
  const placeholders = command.match(/<[^>\s]+>/g) ?? [];
  if (/[|[\]]/.test(command.replace(/'[^']*'/g, '')) || placeholders.some((p) => !FILLED.has(p))) {
    return 'synopsis';
  }
  return 'run';
}

/** Every `unique-jobs` command of a document. */
export function cliExamples(file: string): CliExample[] {
  const lines = readDocument(file).split('\n');
  const examples: CliExample[] = [];
  let fence: { lang: string; start: number } | undefined;
  let paragraph: { start: number; text: string[] } | undefined;
  const flush = () => {
    if (!paragraph) return;
    const text = paragraph.text.join(' ');
    const group = `${file}:${paragraph.start}`;
    for (const [, span] of text.matchAll(/`([^`]+)`/g)) {
      // In prose only `npx unique-jobs …` is a command: `unique-jobs enqueue` there is a span name, not an invocation.
      if (/^npx\s+unique-jobs(\s|$)/.test(span)) {
        examples.push({ where: group, command: span, group, kind: classify(span) });
      }
    }
    paragraph = undefined;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const opening = /^\s*(```|~~~)\s*([\w-]*)/.exec(line);
    if (fence) {
      if (opening) {
        fence = undefined;
        continue;
      }
      if (!SHELL.has(fence.lang)) continue;
      const group = `${file}:${fence.start}`;
      const prompt = /^\$ (.*)$/.exec(line);
      const command = prompt ? prompt[1] : line.trim();
      if (!INVOCATION.test(command)) continue;
      const example: CliExample = { where: `${file}:${i + 1}`, command, group, kind: classify(command) };
      if (prompt) {
        example.expected = [];
        for (let j = i + 1; j < lines.length && !/^\$ /.test(lines[j]) && !/^\s*(```|~~~)/.test(lines[j]); j++) {
          example.expected.push(lines[j]);
        }
      }
      examples.push(example);
      continue;
    }
    if (opening) {
      flush();
      fence = { lang: opening[2].toLowerCase(), start: i + 1 };
      continue;
    }
    // A paragraph or list item: inline code may wrap onto the next line, so spans are read from the joined lines.
    if (line.trim() === '' || /^\s*(\d+\.|[-*])\s/.test(line) || /^#/.test(line)) flush();
    if (line.trim() !== '') {
      paragraph ??= { start: i + 1, text: [] };
      paragraph.text.push(line.trim());
    }
  }
  flush();
  return examples;
}

/** A `digest(…)` or `lockKey(…)` call of a TypeScript block and the result its comment shows. */
export interface DigestExample {
  where: string;
  /** `digest` or `lockKey`. */
  fn: 'digest' | 'lockKey';
  /** The argument, an object literal as written. */
  argument: string;
  /** The result as the comment shows it (`…` standing for the rest of a digest). */
  expected: string;
}

/** Every `digest({…})` / `lockKey({…})` line of a document followed by a `// '<result>'` comment line. */
export function digestExamples(file: string): DigestExample[] {
  const lines = readDocument(file).split('\n');
  const examples: DigestExample[] = [];
  for (let i = 0; i + 1 < lines.length; i++) {
    const call = /^(digest|lockKey)\((\{.*\})\);\s*$/.exec(lines[i].trim());
    const result = /^\/\/ '([^']*)'/.exec(lines[i + 1].trim());
    if (call && result) {
      examples.push({
        where: `${file}:${i + 1}`,
        fn: call[1] as DigestExample['fn'],
        argument: call[2],
        expected: result[1],
      });
    }
  }
  return examples;
}

/**
 * Whether `actual` is what the document shows: `shown` with `…` standing for any run of characters (a shortened digest,
 * a count), everything else literal.
 */
export function matchesShown(shown: string, actual: string): boolean {
  const pattern = shown
    .split('…')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${pattern}$`).test(actual);
}
