// The PostgreSQL tables of a fleet run (./fleet.ts): what the workers record, run by run, for the end-of-run checks.
import type pg from 'pg';

/** The run's table names. */
export interface FleetTables {
  ledger: string;
  effects: string;
  events: string;
  provider: string;
  calls: string;
}

/** Creates the run's tables. No unique index on the ledger or the effects: a second run or effect is a second row. */
export async function createFleetTables(pool: pg.Pool, tables: FleetTables): Promise<void> {
  const { ledger, effects, events, provider, calls } = tables;
  await pool.query(
    `CREATE TABLE ${ledger} (id bigserial PRIMARY KEY, lane text NOT NULL, key text NOT NULL, job_id text NOT NULL,
      worker text NOT NULL, takeover boolean NOT NULL, started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      ended_at timestamptz, outcome text)`,
  );
  await pool.query(
    `CREATE TABLE ${effects} (id bigserial PRIMARY KEY, lane text NOT NULL, key text NOT NULL, job_id text NOT NULL,
      worker text NOT NULL, run_id bigint NOT NULL)`,
  );
  await pool.query(
    `CREATE TABLE ${events} (id bigserial PRIMARY KEY, worker text NOT NULL, type text NOT NULL, job_id text,
      key text, detail jsonb, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
  );
  // The "provider" of the plain lanes: it applies a downstream key once, as a payment provider does.
  await pool.query(
    `CREATE TABLE ${provider} (downstream_key text PRIMARY KEY, lane text NOT NULL, key text NOT NULL,
      calls integer NOT NULL DEFAULT 1)`,
  );
  // Every provider call (plain lanes), with its run.
  await pool.query(
    `CREATE TABLE ${calls} (id bigserial PRIMARY KEY, lane text NOT NULL, key text NOT NULL, run_id bigint NOT NULL,
      worker text NOT NULL, applied boolean NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
  );
}
