// The package-lock.json of the fixture app of pack-install.spec.ts, cut out of this repository's own lockfile, so that
// `npm ci --offline` installs the app from npm's cache alone.
//
// Why a lockfile: `npm ci` (how this repository is installed) fetches tarballs by their integrity and never fetches
// the registry's package documents ("packuments"), so the cache it fills holds tarballs only. `npm install --offline`
// from a package.json needs packuments to resolve versions, and fails (ENOTCACHED, reported as ERESOLVE). With a
// complete lockfile, npm needs nothing but the tarballs: every registry package of the app is the one this repository
// locks, at the same place in the tree, and the library is the packed tarball (a `file:` entry with its integrity).

/** One entry of a lockfile's `packages` (lockfileVersion 2 or 3), as far as this file reads it. */
export interface LockEntry {
  name?: string;
  version?: string;
  resolved?: string;
  integrity?: string;
  dev?: boolean;
  devOptional?: boolean;
  peer?: boolean;
  optional?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  [field: string]: unknown;
}

export interface Lockfile {
  name?: string;
  lockfileVersion: number;
  requires?: boolean;
  packages: Record<string, LockEntry>;
}

/** The library as packed: its tarball (a path relative to the app) and the manifest inside it. */
export interface PackedLibrary {
  tarball: string;
  integrity: string;
  manifest: {
    name: string;
    version: string;
    license?: string;
    bin?: Record<string, string>;
    engines?: Record<string, string>;
    peerDependencies?: Record<string, string>;
    peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  };
}

/** Where Node would find `name` from the package at `from` ('' for the app): the nearest node_modules up the tree. */
function locate(packages: Lockfile['packages'], from: string, name: string): string | undefined {
  let base = from;
  for (;;) {
    const location = `${base ? `${base}/` : ''}node_modules/${name}`;
    if (packages[location]) return location;
    if (!base) return undefined;
    const parent = base.lastIndexOf('/node_modules/');
    base = parent < 0 ? '' : base.slice(0, parent);
  }
}

/**
 * The version this repository's lockfile installs for a top-level package (what its `npm ci` put in the cache).
 * Throws when the package is not in the lockfile.
 */
export function lockedVersion(repoLock: Lockfile, name: string): string {
  const version = repoLock.packages[`node_modules/${name}`]?.version;
  if (!version) throw new Error(`${name} is not in this repository's package-lock.json`);
  return version;
}

/**
 * A lockfile for an app named `name` that depends on `registryDependencies` (exact versions of packages this
 * repository locks) and on the packed library: the closure of those dependencies over the repository's lockfile
 * (dependencies, optional dependencies when locked, and peer dependencies that are not optional), with the `dev`
 * and `peer` flags dropped, since in the app they are production dependencies.
 */
export function offlineLock(
  repoLock: Lockfile,
  name: string,
  registryDependencies: Record<string, string>,
  library: PackedLibrary,
): Lockfile {
  const picked: Record<string, LockEntry> = {};
  const visit = (from: string, dependencies: Record<string, string>, optional: boolean) => {
    for (const dependency of Object.keys(dependencies)) {
      const location = locate(repoLock.packages, from, dependency);
      if (!location) {
        if (optional) continue;
        throw new Error(
          `${dependency} (a dependency of ${from || name}) is not in this repository's package-lock.json`,
        );
      }
      if (picked[location]) continue;
      const { dev: _dev, devOptional: _devOptional, peer: _peer, ...entry } = repoLock.packages[location];
      picked[location] = entry;
      const requiredPeers = Object.entries(entry.peerDependencies ?? {}).filter(
        ([peer]) => !entry.peerDependenciesMeta?.[peer]?.optional,
      );
      visit(location, { ...entry.dependencies, ...Object.fromEntries(requiredPeers) }, false);
      visit(location, entry.optionalDependencies ?? {}, true);
    }
  };
  visit('', registryDependencies, false);
  const requiredLibraryPeers = Object.keys(library.manifest.peerDependencies ?? {}).filter(
    (peer) => !library.manifest.peerDependenciesMeta?.[peer]?.optional,
  );
  const missingPeers = requiredLibraryPeers.filter((peer) => !picked[`node_modules/${peer}`]);
  if (missingPeers.length > 0) {
    throw new Error(`the app does not install the library's peer dependencies ${missingPeers.join(', ')}`);
  }
  const { manifest } = library;
  return {
    name,
    lockfileVersion: 3,
    requires: true,
    packages: {
      '': { name, dependencies: { ...registryDependencies, [manifest.name]: `file:${library.tarball}` } },
      [`node_modules/${manifest.name}`]: {
        version: manifest.version,
        resolved: `file:${library.tarball}`,
        integrity: library.integrity,
        license: manifest.license,
        bin: manifest.bin,
        engines: manifest.engines,
        peerDependencies: manifest.peerDependencies,
        peerDependenciesMeta: manifest.peerDependenciesMeta,
      },
      ...picked,
    },
  };
}
