/**
 * The sample's tables, for SQLite and PostgreSQL (only the id column differs). The unique indexes are the last line of
 * defence: even a write outside `@IdempotencyKey` cannot settle an event, or charge an order, twice.
 */
export function schemaSql(dialect: 'sqlite' | 'postgres'): string {
  const id = dialect === 'sqlite' ? 'INTEGER PRIMARY KEY' : 'serial PRIMARY KEY';
  return `
CREATE TABLE IF NOT EXISTS payments (
  id ${id},
  provider_event_id TEXT NOT NULL,
  amount_cents INTEGER NOT NULL,
  currency TEXT NOT NULL,
  settled_at TEXT NOT NULL,
  settled_by_job_id TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS payments_provider_event_id ON payments (provider_event_id);
CREATE TABLE IF NOT EXISTS charges (
  id ${id},
  order_id INTEGER NOT NULL,
  provider_charge_id TEXT NOT NULL,
  amount_cents INTEGER NOT NULL,
  charged_by_job_id TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS charges_order_id ON charges (order_id);
`;
}
