import { Module } from '@nestjs/common';
import { config } from '../config.js';
import { AppDatabase } from './app-database.js';

/** Provides {@link AppDatabase}: PostgreSQL when `DATABASE_URL` is set, else the SQLite file `SQLITE_FILE`. */
@Module({
  providers: [{ provide: AppDatabase, useFactory: () => AppDatabase.open(config) }],
  exports: [AppDatabase],
})
export class DatabaseModule {}
