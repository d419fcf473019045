import { randomUUID } from 'node:crypto';
import pg from 'pg';

/** The PostgreSQL database of this test run (`npm test` sets DATABASE_URL; it falls back to the local default). */
export function databaseUrl(): string {
  return process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
}

/** A pool on the test database; end it in `afterAll`. */
export function pgPool(max = 5): pg.Pool {
  return new pg.Pool({ connectionString: databaseUrl(), max });
}

/** A table name no other test uses: lowercase, a valid unquoted identifier (SQL stores and handler tables). */
export function uniqueTable(label: string): string {
  const base = label
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .slice(0, 40);
  return `t_${base}_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
}
