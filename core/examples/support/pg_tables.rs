//! What the PostgreSQL inbox benchmarks share: dropping an inbox's tables
//! and functions after a run.

use webhooks_core::inbox::sqlx;

/// Drops the inbox `table` with everything `migrate()` created beside it.
pub(crate) async fn drop_inbox(pool: &sqlx::PgPool, table: &str) -> Result<(), sqlx::Error> {
    for statement in [
        format!("DROP TABLE IF EXISTS \"{table}\""),
        format!("DROP TABLE IF EXISTS \"{table}_control\""),
        format!("DROP TABLE IF EXISTS \"{table}_activity\""),
        format!("DROP TABLE IF EXISTS \"{table}_attempts\""),
        format!("DROP TABLE IF EXISTS \"{table}_actions\""),
        format!("DROP FUNCTION IF EXISTS \"{table}_payload\"(bytea)"),
        format!("DROP FUNCTION IF EXISTS \"{table}_act_fn\"() CASCADE"),
    ] {
        sqlx::query(&statement).execute(pool).await?;
    }
    Ok(())
}
