// The check a user's first `npm install` makes: the library packed with `npm pack` (its prepack script builds dist/),
// installed into a brand-new Nest app (ES modules) from npm's cache alone, the README's worker example compiled with
// `tsc` (strict, NodeNext), and the app booted against the test run's Redis: the job runs once, its duplicates are
// answered as duplicates, the app shuts down by itself, and every Redis key it created is deleted afterwards.
//
// The package is packed from a copy of the files a clone has (not from this working tree, so that it never touches
// dist/); the app is test/package/fixture-app plus a package.json and a package-lock.json made here. Both live in temp
// dirs that are removed at the end. Nothing is downloaded: the install runs with --offline (see offline-lock.ts).
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { deleteKeys, redisClient, scanKeys, uniqueName } from '../support/redis.js';
import { lockedVersion, offlineLock, type Lockfile, type PackedLibrary } from './offline-lock.js';

const repo = (path = '') => fileURLToPath(new URL(`../../${path}`, import.meta.url));
const fixture = (path: string) => fileURLToPath(new URL(`./fixture-app/${path}`, import.meta.url));

/** The package's `files` entries (package.json). */
const FILES = (JSON.parse(readFileSync(repo('package.json'), 'utf8')) as { files: string[] }).files;

/** The files npm packs whatever `files` says. */
const ALWAYS_PACKED = ['package.json', 'README.md', 'LICENSE'];

/**
 * What a clone holds that packing needs: the folders and files `files` names (first path segment), the files npm
 * always packs, and what the prepack script (`npm run build`) reads.
 */
const PACKAGE_SOURCES = [
  ...new Set([
    ...FILES.map((entry) => entry.split('/')[0]),
    ...ALWAYS_PACKED,
    ...['lib', 'scripts', 'tsconfig.json', 'tsconfig.build.json'],
  ]),
];

/** Whether `files` lets a packed path in: an entry itself, a file under an entry's folder, or a glob's match. */
function listed(path: string): boolean {
  return (
    ALWAYS_PACKED.includes(path) ||
    FILES.some((entry) => {
      const pattern = entry
        .split('*')
        .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
        .join('[^/]*');
      return new RegExp(`^${pattern}(/.+)?$`).test(path);
    })
  );
}

/** The app's dependencies besides the library: the README's install line, what Nest needs, and Node's types. */
const APP_DEPENDENCIES = [
  '@nestjs/bullmq',
  '@nestjs/common',
  '@nestjs/core',
  'bullmq',
  'ioredis',
  'reflect-metadata',
  'rxjs',
  '@types/node',
];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/**
 * The environment of the commands run here: this process's, without what `npm test` adds for itself — npm's
 * `npm_*` variables (npm_config_local_prefix would point npm at this repository; npm_config_cache is kept) and jest's
 * NODE_OPTIONS.
 */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (
      name === 'NODE_OPTIONS' ||
      (name.toLowerCase().startsWith('npm_') && name.toLowerCase() !== 'npm_config_cache')
    ) {
      continue;
    }
    env[name] = value;
  }
  return { ...env, ...extra };
}

/** The process groups of the commands still running (killed in afterAll, should a test end before them). */
const running = new Set<number>();

/** Kills a command's process group: npm's scripts and tsc with it. */
function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/**
 * Runs a command to its end in a process group of its own (all of it killed after timeoutMs); resolves its exit
 * code, output and duration. `background`: at a lower CPU priority (nice 10), so that the build and the compilation
 * here slow down the suites jest runs next to this one as little as possible.
 */
function run(
  command: string,
  args: string[],
  cwd: string,
  timeoutMs: number,
  { env = cleanEnv(), background = false }: { env?: NodeJS.ProcessEnv; background?: boolean } = {},
): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const pid = child.pid;
    if (pid !== undefined) {
      running.add(pid);
      if (background) {
        try {
          setPriority(pid, 10);
        } catch {
          // not permitted here: run at the normal priority
        }
      }
    }
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => pid !== undefined && killGroup(pid), timeoutMs);
    const done = () => {
      clearTimeout(timer);
      if (pid !== undefined) running.delete(pid);
    };
    child.on('error', (error) => {
      done();
      reject(error);
    });
    child.on('close', (code) => {
      done();
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

/** Throws, with the command's last lines of output, unless it exited 0. */
function succeeded(what: string, result: Run): Run {
  if (result.code !== 0) {
    const output = `${result.stdout}\n${result.stderr}`.trim().split('\n').slice(-40).join('\n');
    throw new Error(`${what} failed (exit ${result.code ?? 'killed'} after ${result.ms} ms):\n${output}`);
  }
  return result;
}

function filesUnder(dir: string, prefix = ''): string[] {
  return readdirSync(join(dir, prefix), { withFileTypes: true }).flatMap((entry) => {
    const path = prefix ? `${prefix}/${entry.name}` : entry.name;
    return entry.isDirectory() ? filesUnder(dir, path) : [path];
  });
}

describe('the npm package, packed and installed into a fresh Nest app', () => {
  const token = uniqueName('pack-install'); // the run's tag: the leftover-key check sees a key it leaks
  const work = mkdtempSync(join(tmpdir(), 'unique-jobs-pack-'));
  const source = join(work, 'package'); // the copy that is packed
  const unpacked = join(work, 'unpacked'); // the tarball, extracted
  const app = join(work, 'app');
  const redis = redisClient();
  const timings: Record<string, number> = {};
  let library: PackedLibrary | undefined;
  let packedFiles: string[] = [];
  let installed = false;
  let compiled = false;

  beforeAll(async () => {
    mkdirSync(source);
    for (const path of PACKAGE_SOURCES) {
      if (existsSync(repo(path))) cpSync(repo(path), join(source, path), { recursive: true });
    }
    symlinkSync(repo('node_modules'), join(source, 'node_modules'), 'dir'); // what `npm ci` installed, for the build
    const pack = succeeded(
      'npm pack',
      await run('npm', ['pack', '--json', '--pack-destination', work], source, 180_000, { background: true }),
    );
    timings.pack = pack.ms;
    // prepack's build may print before the JSON report: it is the last top-level array of the output.
    const [report] = JSON.parse(pack.stdout.slice(pack.stdout.lastIndexOf('\n[') + 1)) as {
      filename: string;
      integrity: string;
      files: { path: string }[];
    }[];
    packedFiles = report.files.map((file) => file.path).sort();
    const tarball = join(work, report.filename);
    mkdirSync(unpacked);
    succeeded('tar', await run('tar', ['-xzf', tarball, '-C', unpacked, '--strip-components=1'], work, 30_000));
    library = {
      tarball: report.filename,
      integrity: `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`,
      manifest: JSON.parse(readFileSync(join(unpacked, 'package.json'), 'utf8')) as PackedLibrary['manifest'],
    };
    expect(library.integrity).toBe(report.integrity);
  }, 240_000);

  afterAll(async () => {
    for (const pid of running) killGroup(pid);
    try {
      await deleteKeys(redis, await scanKeys(redis, `*${token}*`));
      await redis.quit();
    } finally {
      rmSync(work, { recursive: true, force: true });
      console.log(`pack-install timings (ms): ${JSON.stringify(timings)}`);
    }
  }, 30_000);

  it('holds what `files` lists (of docs/, the .md files only), no images, and maps that carry their sources', () => {
    expect(packedFiles.filter((path) => !listed(path))).toEqual([]);
    expect(packedFiles.filter((path) => path.startsWith('docs/') && !path.endsWith('.md'))).toEqual([]);
    expect(packedFiles.filter((path) => /\.(png|jpe?g|gif|svg|d\.ts\.map|tsbuildinfo)$/.test(path))).toEqual([]);
    expect(
      packedFiles.filter((path) => path.startsWith('dist/redis/scripts/') && path.endsWith('.lua')).length,
    ).toBeGreaterThan(0);

    // Every file package.json points to is in the package.
    const { exports, bin } = JSON.parse(readFileSync(join(unpacked, 'package.json'), 'utf8')) as {
      exports: Record<string, string | Record<string, string>>;
      bin: Record<string, string>;
    };
    const targets = [
      ...Object.values(exports).flatMap((target) => (typeof target === 'string' ? [target] : Object.values(target))),
      ...Object.values(bin),
    ].map((target) => target.replace(/^\.\//, ''));
    expect(targets.filter((target) => !packedFiles.includes(target))).toEqual([]);

    // Each compiled file has its map, and each map carries the TypeScript it maps to (lib/ is not shipped).
    const js = packedFiles.filter((path) => path.endsWith('.js'));
    expect(js.filter((path) => !packedFiles.includes(`${path}.map`))).toEqual([]);
    const incomplete = packedFiles
      .filter((path) => path.endsWith('.js.map'))
      .filter((path) => {
        const map = JSON.parse(readFileSync(join(unpacked, path), 'utf8')) as {
          sources: string[];
          sourcesContent?: (string | null)[];
        };
        return (
          map.sources.length === 0 ||
          map.sourcesContent?.length !== map.sources.length ||
          map.sourcesContent.some((content) => typeof content !== 'string' || content.length === 0)
        );
      });
    expect(incomplete).toEqual([]);
  });

  it('installs offline from the npm cache, on a Node its engines accept', async () => {
    if (!library) throw new Error('npm pack failed (see beforeAll)');
    mkdirSync(app);
    cpSync(join(work, library.tarball), join(app, library.tarball));
    const repoLock = JSON.parse(readFileSync(repo('package-lock.json'), 'utf8')) as Lockfile;
    const dependencies = Object.fromEntries(APP_DEPENDENCIES.map((name) => [name, lockedVersion(repoLock, name)]));
    const manifest = {
      name: 'fresh-nest-app',
      private: true,
      type: 'module',
      dependencies: { ...dependencies, [library.manifest.name]: `file:${library.tarball}` },
    };
    writeFileSync(join(app, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    const lock = offlineLock(repoLock, manifest.name, dependencies, library);
    writeFileSync(join(app, 'package-lock.json'), `${JSON.stringify(lock, null, 2)}\n`);

    // --ignore-scripts: no install script of the stack is needed (msgpackr-extract, bullmq's optional native
    // accelerator, falls back to JavaScript), and none may build or download anything.
    const install = await run('npm', ['ci', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], app, 120_000, {
      background: true,
    });
    timings.install = install.ms;
    if (install.code !== 0 && /ENOTCACHED/.test(install.stdout + install.stderr)) {
      throw new Error(
        `A package is not in npm's cache, and this test does not go online: run \`npm ci\` in the repository first (it fills the cache).\n${install.stderr.slice(-2000)}`,
      );
    }
    succeeded('npm ci --offline in the fresh app', install);
    expect(existsSync(join(app, 'node_modules', library.manifest.name, 'dist', 'index.js'))).toBe(true);

    // npm compares each package's engines with this Node (process.version) and warns EBADENGINE: never for the
    // library. On Node 20 the one warning is file-type (a dependency of @nestjs/common, which only its
    // FileTypeValidator loads), as the README says; on Node 22 and later there is none.
    const unsupported = [...(install.stdout + install.stderr).matchAll(/EBADENGINE\s+package: '([^']+)'/g)].map(
      ([, name]) => name.replace(/@[^@]+$/, ''),
    );
    expect(unsupported).not.toContain(library.manifest.name);
    expect(unsupported.filter((name) => name !== 'file-type')).toEqual([]);
    if (Number(process.versions.node.split('.')[0]) >= 22) expect(unsupported).toEqual([]);
    installed = true;
  }, 150_000);

  it("compiles the README's worker with tsc (strict, module and moduleResolution NodeNext)", async () => {
    if (!installed) throw new Error('the install failed (see the test before)');
    cpSync(fixture('src'), join(app, 'src'), { recursive: true });
    cpSync(fixture('tsconfig.app.json'), join(app, 'tsconfig.json'));
    const tsc = repo('node_modules/typescript/bin/tsc'); // the TypeScript this repository builds with
    timings.tsc = succeeded(
      'tsc -p tsconfig.json',
      await run(process.execPath, [tsc, '-p', 'tsconfig.json'], app, 120_000, { background: true }),
    ).ms;
    const { compilerOptions } = JSON.parse(readFileSync(join(app, 'tsconfig.json'), 'utf8')) as {
      compilerOptions: Record<string, unknown>;
    };
    expect(compilerOptions).toMatchObject({ strict: true, module: 'NodeNext', moduleResolution: 'NodeNext' });
    expect(filesUnder(join(app, 'dist')).sort()).toEqual(
      filesUnder(join(app, 'src'))
        .map((path) => path.replace(/\.ts$/, '.js'))
        .sort(),
    );
    compiled = true;
  }, 150_000);

  it('boots against Redis: the job runs once, its duplicates are answered as duplicates, the app shuts down by itself and its keys are deleted', async () => {
    if (!compiled) throw new Error('the app did not compile (see the test before)');
    const env = cleanEnv({ REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', FIXTURE_TOKEN: token });
    // The app does not call process.exit: it ends only when app.close() left no connection or timer open.
    const boot = await run(process.execPath, ['dist/main.js'], app, 45_000, { env });
    timings.boot = boot.ms;
    succeeded('node dist/main.js', boot);
    const line = boot.stdout.split('\n').find((text) => text.startsWith('RESULT '));
    if (!line) throw new Error(`the app printed no RESULT line:\n${boot.stdout}\n${boot.stderr}`);
    const result = JSON.parse(line.slice('RESULT '.length)) as Record<string, unknown> & {
      jobId: string;
      digest: string;
    };

    expect(result).toEqual({
      jobId: expect.any(String),
      digest: expect.stringMatching(/^v1:[0-9a-f]{64}$/),
      // queue.add of a duplicate returns the job that holds the lock…
      again: { id: result.jobId },
      // …UniqueJobsService.enqueue says so.
      explicit: {
        status: 'duplicate',
        existingJobId: result.jobId,
        strategy: 'reject',
        digest: result.digest,
        deadSetEntryId: expect.any(String),
      },
      explicitWasDeduplicated: true,
      state: 'completed',
      returnValue: { settled: 'evt_123' },
      calls: ['evt_123'],
      deadSet: [
        { existingJobId: result.jobId, digest: result.digest },
        { existingJobId: result.jobId, digest: result.digest },
      ],
    });

    // Every key the app created carries the token in its prefix (BullMQ's or the library's): delete them all.
    const keys = await scanKeys(redis, `*${token}*`);
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.filter((key) => !key.startsWith(`${token}-bull:`) && !key.startsWith(`${token}-uj:`))).toEqual([]);
    await deleteKeys(redis, keys);
    expect(await scanKeys(redis, `*${token}*`)).toEqual([]);
  }, 60_000);
});
