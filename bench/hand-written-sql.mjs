// The hand-written alternative to transactional mode that the SQL benches compare against (the seed's): the key and
// the effect in one transaction.

/**
 * BEGIN, `INSERT … ON CONFLICT DO NOTHING` of `key` into `keysTable`, the effect (`effectSql` with `key`) when the key
 * was new, COMMIT. `keepResult`: it also stores the handler's result with the key (one UPDATE before COMMIT; the table
 * needs a `result jsonb` column), as a store that answers a later duplicate with the first result must: the floor for
 * that design.
 */
export async function handWrittenEffectOnce(pool, { keysTable, effectSql }, key, keepResult = false) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const claimed = await client.query(`INSERT INTO "${keysTable}" (key) VALUES ($1) ON CONFLICT DO NOTHING`, [key]);
    if (claimed.rowCount === 1) await client.query(effectSql, [key]);
    if (claimed.rowCount === 1 && keepResult) {
      await client.query(`UPDATE "${keysTable}" SET result = $2 WHERE key = $1`, [key, '{"value":null}']);
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
}
