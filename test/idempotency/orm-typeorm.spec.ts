// TypeOrmIdempotencyStore across worker processes: the handler writes through the claim's EntityManager
// (manager.getRepository(Effect).save), on PostgreSQL and on SQLite (better-sqlite3). See orm-scenarios.ts.
import { describeOrmScenarios } from './orm-scenarios.js';

describeOrmScenarios('typeorm', 'postgres');
describeOrmScenarios('typeorm', 'sqlite');
