// DrizzleIdempotencyStore across worker processes: the handler writes through the claim's Drizzle tx (node-postgres),
// or through the database whose connection holds the transaction (better-sqlite3). See orm-scenarios.ts.
import { describeOrmScenarios } from './orm-scenarios.js';

describeOrmScenarios('drizzle', 'postgres');
describeOrmScenarios('drizzle', 'sqlite');
