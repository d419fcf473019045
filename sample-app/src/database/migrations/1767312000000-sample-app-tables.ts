import { Table, type MigrationInterface, type QueryRunner, type TableColumnOptions } from 'typeorm';

/**
 * The sample's own tables, `payments` and `charges` (see the entities), on PostgreSQL and SQLite alike: TypeORM's
 * `Table` API writes each database's SQL. It runs at startup (`migrationsRun`) after the library's
 * `UniqueJobsIdempotencyMigration`, which creates the idempotency records' table.
 */
export class SampleAppTables1767312000000 implements MigrationInterface {
  readonly name = 'SampleAppTables1767312000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    // What TypeORM maps a `Date` property to on each database.
    const dateTime = queryRunner.dataSource.options.type === 'postgres' ? 'timestamp' : 'datetime';
    const id: TableColumnOptions = {
      name: 'id',
      type: 'integer',
      isPrimary: true,
      isGenerated: true,
      generationStrategy: 'increment',
    };
    await queryRunner.createTable(
      new Table({
        name: 'payments',
        columns: [
          id,
          { name: 'provider_event_id', type: 'text' },
          { name: 'amount_cents', type: 'integer' },
          { name: 'currency', type: 'text' },
          { name: 'settled_at', type: dateTime },
          { name: 'settled_by_job_id', type: 'text' },
        ],
        indices: [{ name: 'payments_provider_event_id', columnNames: ['provider_event_id'], isUnique: true }],
      }),
      true,
    );
    await queryRunner.createTable(
      new Table({
        name: 'charges',
        columns: [
          id,
          { name: 'order_id', type: 'integer' },
          { name: 'provider_charge_id', type: 'text' },
          { name: 'amount_cents', type: 'integer' },
          { name: 'charged_by_job_id', type: 'text' },
        ],
        indices: [{ name: 'charges_order_id', columnNames: ['order_id'], isUnique: true }],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('charges', true);
    await queryRunner.dropTable('payments', true);
  }
}
