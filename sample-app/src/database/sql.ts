import type BetterSqlite3 from 'better-sqlite3';
import type pg from 'pg';

/**
 * A connection the sample runs SQL on: a better-sqlite3 `Database`, or a `pg` pool or client. Inside a transactional
 * `@IdempotencyKey` handler, `idempotencyOf(job).transaction` is one of these.
 */
export type Connection = BetterSqlite3.Database | pg.Pool | pg.PoolClient;

/** The one call the sample's repositories make: a statement with `?` placeholders, its rows back. */
export interface Sql {
  /** Runs `text` with `params` and resolves the rows it returns (none for a write without `RETURNING`). */
  query<Row>(text: string, params?: readonly unknown[]): Promise<Row[]>;
}

/** {@link Sql} on a connection of either database: the statements are written once, for both. */
export function sqlOn(connection: Connection): Sql {
  if ('prepare' in connection) {
    return {
      query: async <Row>(text: string, params: readonly unknown[] = []) => {
        const statement = connection.prepare(text);
        if (statement.reader) return statement.all(...params) as Row[];
        statement.run(...params);
        return [];
      },
    };
  }
  return {
    query: async <Row>(text: string, params: readonly unknown[] = []) => {
      let n = 0;
      const { rows } = await connection.query(
        text.replace(/\?/g, () => `$${++n}`),
        [...params],
      );
      return rows as Row[];
    },
  };
}
