//! A bare axum server answering `204` on every path, no webhook layer: the
//! target `docs/cli.md` measures `webhooks send --repeat` against (the
//! sender's own throughput, not a receiver's).
//!
//! ```text
//! cargo run --release -p webhooks-cli --example bare_axum -- 127.0.0.1:3999
//! ```

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3999".to_owned());
    let app = axum::Router::new().fallback(|| async { axum::http::StatusCode::NO_CONTENT });
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await
}
