// `npm run lint` step: the public API as shipped is documented and free of `any`. Loads lib/ with tsconfig.build.json,
// takes the entry points from package.json "exports" (dist/x.d.ts -> lib/x.ts) and walks every symbol they export
// (`export *` and `export type *` followed). Checked: each exported declaration; each public member (not private or
// protected, not `#x`, not `_x`; parameter properties and statics included) of exported classes and interfaces, each
// enum member, and each member of the type literals reachable by name (an exported alias's literal, a member's literal,
// nested). Fails, one line per problem, when one of them
//  - has no TSDoc summary: overloads and merged declarations need one between them; a member that implements or
//    overrides a documented one inherits its doc, as editors show it;
//  - has `any` in its declared or inferred type, found through the checker: unions, intersections, type arguments,
//    type parameter constraints and defaults, call and construct signatures (parameters, returns), index signatures,
//    heritage clauses and the members of our own unnamed or unexported types. A named type from a dependency (or the
//    TypeScript lib) is not entered, its internals are not ours, but its type arguments are: `Job` written without them
//    is `Job<any, any, string>`. The global `Function` counts as `any`.
// ALLOWED lists the `any`s that a dependency's types impose, each with its reason.
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const libDir = join(root, 'lib') + sep;

/** `package:Type` -> why that dependency's generic may carry `any` type arguments in our signatures. */
const ALLOWED_TYPES = new Map([
  // Invariant in their job types (a `Queue<MyData>` is no `Queue<unknown>`): `Queue<any>` is the only way to write
  // "an application's queue, whatever its job types", which the library takes, holds and hands back.
  ['bullmq:Queue', 'BullMQ queues are invariant in their job types'],
  ['bullmq:Worker', 'BullMQ workers are invariant in their job types'],
]);
/** Exported name (or `Class.member`) -> why its `any` is imposed by a dependency. */
const ALLOWED_SITES = new Map([
  // ConfigurableModuleBuilder's class is typed `{ new (): any }`: a module class extending it has an `any` instance.
  ['UniqueJobsModule', "@nestjs/common's ConfigurableModuleCls constructs `any`"],
]);
const allowedUsed = new Set();

const configFile = join(root, 'tsconfig.build.json');
const config = ts.getParsedCommandLineOfConfigFile(
  configFile,
  {},
  { ...ts.sys, onUnRecoverableConfigFileDiagnostic() {} },
);
const program = ts.createProgram({ rootNames: config.fileNames, options: { ...config.options, noEmit: true } });
const checker = program.getTypeChecker();
const { outDir, rootDir } = config.options;

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const entries = Object.values(pkg.exports)
  .map((target) => (typeof target === 'string' ? undefined : target.types))
  .filter((types) => types?.endsWith('.d.ts'))
  .map((types) => join(rootDir, relative(outDir, resolve(root, types))).replace(/\.d\.ts$/, '.ts'));

const own = (node) => node.getSourceFile().fileName.startsWith(libDir.split(sep).join('/'));
const packageOf = (node) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(node.getSourceFile().fileName)?.[1];
const ownDecls = (symbol) => (symbol?.declarations ?? []).filter(own);
const external = (symbol) => !!symbol?.declarations?.length && ownDecls(symbol).length === 0;
const where = (node) => {
  const sf = node.getSourceFile();
  const line = sf.getLineAndCharacterOfPosition((node.name ?? node).getStart(sf)).line + 1;
  return `${relative(root, sf.fileName)}:${line}`;
};
const hidden = (decl) =>
  (ts.getCombinedModifierFlags(decl) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) !== 0 ||
  (decl.name && ts.isPrivateIdentifier(decl.name));

const problems = [];
const report = (node, name, problem) => problems.push(`${where(node)} ${name}: ${problem}`);

// Pass 1: the sites (a name, its declaration, its type) and the containers (declarations whose members are sites, so
// that the search for `any` stops at them instead of reporting their members twice).
const sites = [];
const containers = new Set();
const seen = new Set();

const docOf = (symbol) => ts.displayPartsToString(symbol.getDocumentationComment(checker)).trim();
function documented(name, symbol, node) {
  if (!docOf(symbol)) report(node, name, 'missing TSDoc');
}

/**
 * The type literals of a type annotation (`{…}`, `A & {…} | B`, `readonly {…}[]`, `Readonly<{…}>`), with our own
 * unexported interfaces and aliases it names: their members are reachable by name through it.
 */
function literalsIn(node) {
  if (!node) return [];
  if (ts.isTypeLiteralNode(node)) return [node];
  if (ts.isUnionTypeNode(node) || ts.isIntersectionTypeNode(node)) return node.types.flatMap(literalsIn);
  if (ts.isParenthesizedTypeNode(node) || ts.isTypeOperatorNode(node)) return literalsIn(node.type);
  if (ts.isArrayTypeNode(node)) return literalsIn(node.elementType);
  if (!ts.isTypeReferenceNode(node)) return [];
  const named = checker.getSymbolAtLocation(node.typeName);
  const target = named && named.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(named) : named;
  const decls = exported.has(target) ? [] : ownDecls(target);
  return [
    ...decls.filter(ts.isInterfaceDeclaration),
    ...decls.filter(ts.isTypeAliasDeclaration).flatMap((alias) => literalsIn(alias.type)),
    ...(node.typeArguments ?? []).flatMap(literalsIn),
  ];
}

/** The members of these literals, under `name`: a member named in several (the variants of a union) needs one doc. */
function addLiterals(name, literals) {
  const members = [];
  for (const literal of literals) {
    containers.add(literal);
    sites.push({ name, node: literal, shallow: checker.getTypeAtLocation(literal) });
    members.push(...checker.getPropertiesOfType(checker.getTypeAtLocation(literal)));
  }
  const docs = new Set(members.filter((member) => docOf(member)).map((member) => member.name));
  for (const member of members) addMember(name, member, docs.has(member.name));
}

function addMember(parent, symbol, documentedElsewhere = false) {
  const decl = ownDecls(symbol)[0];
  if (!decl || seen.has(decl) || hidden(decl) || /^(_|#|__#)/.test(symbol.name)) return;
  seen.add(decl);
  const name = `${parent}.${symbol.name}`;
  if (!documentedElsewhere) documented(name, symbol, decl);
  sites.push({ name, node: decl, type: checker.getTypeOfSymbol(symbol) });
  const annotations = ownDecls(symbol).filter(
    (d) => ts.isPropertySignature(d) || ts.isPropertyDeclaration(d) || ts.isParameter(d),
  );
  addLiterals(
    name,
    annotations.flatMap((d) => literalsIn(d.type)),
  );
}

function addExport(name, symbol) {
  const decls = ownDecls(symbol);
  if (decls.length === 0 || seen.has(symbol)) return;
  seen.add(symbol);
  documented(name, symbol, decls[0]);
  const { flags } = symbol;
  const instance = flags & (ts.SymbolFlags.Class | ts.SymbolFlags.Interface) && checker.getDeclaredTypeOfSymbol(symbol);
  for (const decl of decls) {
    for (const param of decl.typeParameters ?? []) {
      sites.push({ name: `${name}<${param.name.text}>`, node: param, type: checker.getTypeAtLocation(param) });
    }
    for (const clause of decl.heritageClauses ?? []) {
      // A class's base is a value (`extends ConfigurableModuleClass`): its instance type is what the class inherits.
      const bases = ts.isClassLike(decl) && clause.token === ts.SyntaxKind.ExtendsKeyword;
      const types = bases ? checker.getBaseTypes(instance) : clause.types.map((t) => checker.getTypeAtLocation(t));
      for (const type of types) sites.push({ name, node: clause, type });
    }
  }
  if (instance) {
    for (const decl of decls) containers.add(decl);
    sites.push({ name, node: decls[0], shallow: instance });
    for (const member of checker.getPropertiesOfType(instance)) addMember(name, member);
  }
  if (flags & ts.SymbolFlags.Class) {
    const statics = checker.getTypeOfSymbol(symbol);
    sites.push({ name: `new ${name}`, node: decls[0], shallow: statics });
    for (const member of checker.getPropertiesOfType(statics)) if (member.name !== 'prototype') addMember(name, member);
  } else if (flags & (ts.SymbolFlags.Function | ts.SymbolFlags.Variable)) {
    sites.push({ name, node: decls[0], type: checker.getTypeOfSymbol(symbol) });
  }
  if (flags & ts.SymbolFlags.Enum) {
    for (const member of symbol.exports?.values() ?? []) addMember(name, member);
  }
  if (flags & ts.SymbolFlags.TypeAlias) {
    const alias = decls.find(ts.isTypeAliasDeclaration);
    addLiterals(name, literalsIn(alias.type));
    sites.push({ name, node: alias, type: checker.getTypeAtLocation(alias.type) });
  }
}

const exported = new Map(); // symbol -> exported name
for (const entry of entries) {
  for (const symbol of checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(entry)))) {
    const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
    if (!exported.has(target)) exported.set(target, symbol.name);
  }
}
for (const [symbol, name] of exported) addExport(name, symbol);

// Pass 2: the search for `any`. Returns where it is (`param options > useFactory > return`), or undefined.
const found = new Map();
function findAny(type) {
  if (type.flags & ts.TypeFlags.Any) return 'any';
  if (found.has(type)) return found.get(type);
  found.set(type, undefined); // a type that refers to itself: the first visit searches it
  const at = search(type);
  found.set(type, at);
  return at;
}

const first = (items, describe, typeOf) => {
  for (const item of items) {
    const at = findAny(typeOf(item));
    if (at) return `${describe(item)} > ${at}`;
  }
};

function inSignatures(type) {
  for (const kind of [ts.SignatureKind.Call, ts.SignatureKind.Construct]) {
    for (const signature of checker.getSignaturesOfType(type, kind)) {
      const at =
        first(
          signature.getTypeParameters() ?? [],
          (p) => `<${p.symbol.name}>`,
          (p) => p,
        ) ??
        first(
          signature.getParameters(),
          (p) => `param ${p.name}`,
          (p) => checker.getTypeOfSymbol(p),
        ) ??
        (findAny(signature.getReturnType()) && `return > ${findAny(signature.getReturnType())}`);
      if (at) return at;
    }
  }
  return first(
    checker.getIndexInfosOfType(type),
    (info) => `[${checker.typeToString(info.keyType)}]`,
    (i) => i.type,
  );
}

function search(type) {
  if (type.flags & ts.TypeFlags.UnionOrIntersection)
    return first(
      type.types,
      (t) => checker.typeToString(t),
      (t) => t,
    );
  if (type.flags & ts.TypeFlags.TypeParameter) {
    const bounds = [type.getConstraint(), checker.getDefaultFromTypeParameter(type)];
    return first(
      bounds.filter(Boolean),
      () => 'bound',
      (t) => t,
    );
  }
  if (!(type.flags & ts.TypeFlags.Object)) return undefined;
  const symbol = type.aliasSymbol ?? type.symbol;
  if (symbol?.name === 'Function' && external(symbol)) return 'Function';
  const allowed = symbol?.declarations?.[0] && `${packageOf(symbol.declarations[0])}:${symbol.name}`;
  if (ALLOWED_TYPES.has(allowed)) return void allowedUsed.add(allowed);
  const args = [...(type.aliasTypeArguments ?? [])];
  if (type.objectFlags & ts.ObjectFlags.Reference) args.push(...checker.getTypeArguments(type));
  const inArgs = first(
    args,
    (t) => `<${checker.typeToString(t)}>`,
    (t) => t,
  );
  if (inArgs || external(symbol) || ownDecls(type.symbol).some((d) => containers.has(d))) return inArgs;
  const members = checker.getPropertiesOfType(type).filter((m) => ownDecls(m).length && !ownDecls(m).some(hidden));
  return (
    first(
      members,
      (m) => m.name,
      (m) => checker.getTypeOfSymbol(m),
    ) ?? inSignatures(type)
  );
}

for (const site of sites) {
  const at = site.shallow ? inSignatures(site.shallow) : findAny(site.type);
  if (at && ALLOWED_SITES.has(site.name)) allowedUsed.add(site.name);
  if (!at || ALLOWED_SITES.has(site.name)) continue;
  const text = checker.typeToString(site.shallow ?? site.type);
  report(site.node, site.name, `contains any: ${text.length > 150 ? text.slice(0, 150) + '…' : text} (at ${at})`);
}

for (const name of [...ALLOWED_TYPES.keys(), ...ALLOWED_SITES.keys()].filter((key) => !allowedUsed.has(key))) {
  problems.push(`scripts/check-api.mjs: allowed ${name} has no \`any\` left to allow, remove it`);
}
if (problems.length === 0) {
  console.log(`public API: ${seen.size} declarations from ${entries.length} entry points, all documented, no any`);
} else {
  for (const problem of problems) console.error(problem);
  console.error(`${problems.length} problem(s) in the public API`);
  process.exit(1);
}
