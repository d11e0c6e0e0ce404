//! One rustls crypto provider for every TLS feature: ring.
//!
//! rustls picks its process-wide provider by itself only when exactly one is
//! compiled in. An application whose other dependencies turn on aws-lc-rs
//! (reqwest's default features do) has both, and a client built with
//! `rustls::ClientConfig::builder()` (redis-rs does) then panics: "Could not
//! automatically determine the process-level CryptoProvider". Before building
//! a TLS client, the library installs ring as the process default, unless the
//! application installed one already (which is then used).

/// Installs ring as rustls' process-wide provider, unless one is installed.
pub(crate) fn use_ring() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may install one meanwhile: theirs is kept, fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// What a `rediss://` connection that failed says when the server at that
/// address answers plain Redis: the URL's scheme or port is wrong.
#[cfg(feature = "redis-tls")]
pub(crate) const PLAIN_REDIS: crate::ConfigError = crate::ConfigError::Invalid {
    what: "redis URL",
    reason: "rediss:// (TLS), but the server at that address answers plain Redis: the TLS \
             handshake cannot succeed; use redis://, or the port the server serves TLS on",
};

/// After a `rediss://` connection failed: whether the server answers a
/// plain-text `PING` (`+PONG`, or an error such as `-NOAUTH`) within a
/// second, that is, speaks plain Redis where TLS was expected.
///
/// A plain Redis reads a TLS ClientHello as an inline command: it answers
/// an error, or waits for a newline that may never come (and the connection
/// timed out). Either way the driver's error does not say "TLS".
#[cfg(feature = "redis-tls")]
pub(crate) async fn answers_plain_redis(client: &redis::Client) -> bool {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let redis::ConnectionAddr::TcpTls { host, port, .. } = client.get_connection_info().addr()
    else {
        return false;
    };
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
        stream.write_all(b"PING\r\n").await?;
        let mut first = [0u8; 1];
        stream.read_exact(&mut first).await?;
        Ok::<_, std::io::Error>(matches!(first[0], b'+' | b'-'))
    };
    matches!(
        tokio::time::timeout(std::time::Duration::from_secs(1), probe).await,
        Ok(Ok(true))
    )
}
