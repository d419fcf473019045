import { indexOf } from './postgres-migration.js';
import { query, RECORD_TABLE_COLUMNS, type SqlDialect } from './sql-dialect.js';
import type { SqlTableName } from './sql-records.js';

/**
 * The statements on PostgreSQL that check the record table rather than use it: the probes of `verify` (every column
 * read, and the primary key the claims' `ON CONFLICT` needs, planned), the column types read from the catalog, and
 * whether the migration has run (the table and its index exist).
 */
export function postgresTableChecks(
  table: SqlTableName,
): Required<Pick<SqlDialect, 'probe' | 'columnTypes' | 'migrated'>> {
  const t = table.quoted;
  const probe = `SELECT ${RECORD_TABLE_COLUMNS} FROM ${t} LIMIT 0`;
  // Only planned (EXPLAIN): nothing written, no trigger fired, and a read-only standby or transaction answers it too.
  const probeKey = `EXPLAIN INSERT INTO ${t} (scope, key) VALUES ('', '') ON CONFLICT (scope, key) DO NOTHING`;
  // (A generated column has `atthasdef` too; `attidentity` is PostgreSQL 10's, `attgenerated` 12's: not read.) A NOT
  // NULL column is not required when an enabled BEFORE INSERT row trigger may fill it (tgtype bits: row 1, before 2,
  // insert 4).
  const relation = `to_regclass('${t.replace(/'/g, "''")}')`;
  const filledByTrigger = `EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = ${relation} AND NOT tgisinternal
      AND tgenabled <> 'D' AND tgtype & 7 = 7)`;
  // A domain without constraints of its own (no NOT NULL, no CHECK) is checked as its base type; one with constraints
  // as itself (refused: a CHECK may refuse what the store writes).
  const plainDomain = `typtype = 'd' AND NOT typnotnull
      AND NOT EXISTS (SELECT 1 FROM pg_constraint WHERE contypid = pg_type.oid)`;
  const columnTypes = `SELECT attname AS name, CASE WHEN ${plainDomain} THEN format_type(typbasetype, typtypmod)
      ELSE format_type(atttypid, atttypmod) END AS type,
      attnotnull AND NOT atthasdef AND attidentity = '' AND NOT ${filledByTrigger} AS required
    FROM pg_attribute JOIN pg_type ON pg_type.oid = atttypid
    WHERE attrelid = ${relation} AND attnum > 0 AND NOT attisdropped`;
  const regclass = (name: string) => `to_regclass('${name.replace(/'/g, "''")}') IS NOT NULL`;
  const migrated = `SELECT ${regclass(t)} AND ${regclass(indexOf(table))} AS done`;
  return {
    probe: () => [query(probe, []), query(probeKey, [])],
    columnTypes: () => query(columnTypes, []),
    migrated: () => query(migrated, []),
  };
}
