// `npm run lint` step: the folders of lib/ import each other one way only. Builds the graph of imports between the
// folders of lib/ (top-level ones, and the subfolders of ops/ and idempotency/; type imports included) and fails, naming
// one import of each direction, when two folders import each other directly or through others (a cycle). Files at lib/
// top level (index.ts) may import anything. Also fails when a command of the CLI (lib/ops/cli/bin.ts) would load NestJS
// (through imports that load code): an operator's command would start twice as slowly (0.3 s more CPU a run).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'lib');
const IMPORT = /^\s*(?:import|export)\b[^'"]*?from\s+['"](\.[^'"]+)['"]/gm;

function* files(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* files(path);
    else if (name.endsWith('.ts')) yield path;
  }
}

/** The folders whose subfolders are units of their own (ops/admin, idempotency/sql, …). */
const SPLIT = new Set(['ops', 'idempotency']);

/** The unit of layering: `ops/admin` for files under lib/ops/admin (likewise under the other SPLIT folders), else the
 * top-level folder (a SPLIT folder's own files are the unit `ops`, `idempotency`). */
const unitOf = (path) => {
  const parts = relative(root, path).split(sep);
  if (parts.length === 1) return undefined;
  return SPLIT.has(parts[0]) && parts.length > 2 ? `${parts[0]}/${parts[1]}` : parts[0];
};

const edges = new Map(); // unit -> Map(unit -> example "file -> import")
for (const file of files(root)) {
  const from = unitOf(file);
  if (!from) continue;
  for (const [, spec] of readFileSync(file, 'utf8').matchAll(IMPORT)) {
    const to = unitOf(resolve(dirname(file), spec));
    if (!to || to === from) continue;
    if (!edges.has(from)) edges.set(from, new Map());
    if (!edges.get(from).has(to)) edges.get(from).set(to, `${relative(root, file)} imports ${spec}`);
  }
}

// Tarjan's strongly connected components: any component of more than one unit is a cycle.
let index = 0;
const stack = [];
const state = new Map();
const cycles = [];
function visit(unit) {
  state.set(unit, { index, low: index, onStack: true });
  index++;
  stack.push(unit);
  for (const next of edges.get(unit)?.keys() ?? []) {
    if (!state.has(next)) {
      visit(next);
      state.get(unit).low = Math.min(state.get(unit).low, state.get(next).low);
    } else if (state.get(next).onStack) {
      state.get(unit).low = Math.min(state.get(unit).low, state.get(next).index);
    }
  }
  if (state.get(unit).low === state.get(unit).index) {
    const component = [];
    let member;
    do {
      member = stack.pop();
      state.get(member).onStack = false;
      component.push(member);
    } while (member !== unit);
    if (component.length > 1) cycles.push(component);
  }
}
for (const unit of edges.keys()) if (!state.has(unit)) visit(unit);

/**
 * The chain of imports that load code (not `import type`) from `entry` to a package matching `banned`, if any: static
 * imports, and the dynamic imports of the files `entry` loads statically (the CLI's command table, each command loaded
 * on its run); not the dynamic imports a command makes for one subcommand (`dead retry` loads the whole enqueue path).
 */
function loadedChain(entry, banned) {
  const VALUE_IMPORT =
    /^\s*(?:import|export)\s+(?!type\b)[^'"]*?from\s+['"]([^'"]+)['"]|^\s*import\s+['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm;
  const seen = new Map([[entry, { by: undefined, lazy: false }]]); // file -> who imported it first, after a dynamic hop
  const queue = [entry];
  const chain = (file) => (file ? [...chain(seen.get(file).by), relative(root, file)] : []);
  while (queue.length > 0) {
    const file = queue.shift();
    const { lazy } = seen.get(file);
    for (const [, from, bare, dynamic] of readFileSync(file, 'utf8').matchAll(VALUE_IMPORT)) {
      if (dynamic && lazy) continue;
      const spec = from ?? bare ?? dynamic;
      if (banned.test(spec)) return [...chain(file), spec];
      if (!spec.startsWith('.')) continue;
      const next = resolve(dirname(file), spec).replace(/\.js$/, '.ts');
      if (!seen.has(next)) {
        seen.set(next, { by: file, lazy: lazy || dynamic !== undefined });
        queue.push(next);
      }
    }
  }
  return undefined;
}
const cliNest = loadedChain(join(root, 'ops', 'cli', 'bin.ts'), /^@nestjs\//);
if (cliNest) {
  console.error(`A CLI command loads NestJS: ${cliNest.join(' -> ')}`);
  process.exit(1);
}

if (cycles.length === 0) {
  console.log(
    `lib/ layering: ${edges.size} folders, no import cycle between them; no CLI command loads NestJS (but dead retry's enqueue path)`,
  );
} else {
  for (const component of cycles) {
    console.error(`Import cycle between lib/ folders: ${component.sort().join(', ')}`);
    for (const from of component) {
      for (const [to, example] of edges.get(from) ?? []) {
        if (component.includes(to)) console.error(`  ${from} -> ${to}: ${example}`);
      }
    }
  }
  process.exit(1);
}
