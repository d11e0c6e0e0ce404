use tower_webhooks::core::inbox::{Job, PostgresInbox, Shutdown, Worker, sqlx};

#[derive(serde::Deserialize)]
struct Payment {
    id: String,
    cents: i64,
}

async fn payments(shutdown: &Shutdown) -> Result<(), Box<dyn std::error::Error>> {
    let inbox = PostgresInbox::connect("postgres://app@db.internal/app").await?;
    inbox.migrate().await?;
    let worker = Worker::transactional(inbox).concurrency(4)
        .transactional_handler(|job: Job<Payment>, tx| Box::pin(async move {
            sqlx::query("INSERT INTO payments (id, cents) VALUES ($1, $2)")
                .bind(&job.event.id).bind(job.event.cents)
                .execute(&mut **tx).await?;                 // in the inbox's transaction
            Ok::<(), sqlx::Error>(())                         // commits with "done"; Err: rolled back, retried
        }));
    tokio::spawn(worker.run(shutdown.signal()));
    Ok(())
}
