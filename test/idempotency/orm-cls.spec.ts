// TransactionHostIdempotencyStore (@nestjs-cls/transactional) across worker processes: the handler calls a service whose
// @Transactional() method writes through txHost.tx, with no knowledge of the job or the claim; it joins the claim's
// transaction. TypeORM adapter on PostgreSQL and SQLite, Drizzle adapter on PostgreSQL (Drizzle's SQLite transactions
// cannot await). The PostgreSQL pool store's dropped-connection case runs here too. See orm-scenarios.ts.
import { describeOrmScenarios } from './orm-scenarios.js';

describeOrmScenarios('cls-typeorm', 'postgres');
describeOrmScenarios('cls-drizzle', 'postgres');
describeOrmScenarios('cls-typeorm', 'sqlite');
describeOrmScenarios('pg', 'postgres', ['dropped']);
