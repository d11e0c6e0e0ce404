//! The library's own query parameters in a store or inbox URL (`table`,
//! `prefix`, `retention`): taken out before the URL reaches its driver.

use crate::ConfigError;

/// A URL without the library's parameters, and their values.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct UrlOptions {
    /// The URL for the driver: every other parameter kept, in order.
    pub(crate) url: String,
    /// `table=`: the SQL table.
    pub(crate) table: Option<String>,
    /// `prefix=`: the Redis key prefix.
    pub(crate) prefix: Option<String>,
    /// `retention=`: how long completed events are kept (inboxes only).
    pub(crate) retention: Option<String>,
    /// `partitions=`: the Redis Cluster inbox's partitions.
    pub(crate) partitions: Option<String>,
    /// `short_retention=allow`: a `retention` below the providers' retry
    /// windows, knowingly (inboxes only).
    pub(crate) short_retention: Option<String>,
}

impl UrlOptions {
    /// Splits `url`'s query into the library's parameters and the driver's.
    /// Values are percent-decoded; errors never contain the URL (it may
    /// hold a password).
    pub(crate) fn take(url: &str, what: &'static str) -> Result<Self, ConfigError> {
        let Some((base, query)) = url.split_once('?') else {
            return Ok(Self {
                url: url.to_owned(),
                ..Self::default()
            });
        };
        let mut options = Self::default();
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let slot = match name {
                "table" => &mut options.table,
                "prefix" => &mut options.prefix,
                "retention" => &mut options.retention,
                "partitions" => &mut options.partitions,
                "short_retention" => &mut options.short_retention,
                _ => {
                    kept.push(pair);
                    continue;
                }
            };
            let value = decode(value).ok_or(ConfigError::Invalid {
                what,
                reason: "a `table`, `prefix`, `retention` or `partitions` parameter is not valid percent-encoded UTF-8",
            })?;
            if value.is_empty() || slot.replace(value).is_some() {
                return Err(ConfigError::Invalid {
                    what,
                    reason: "a `table`, `prefix`, `retention` or `partitions` parameter is empty or given twice",
                });
            }
        }
        options.url = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        Ok(options)
    }
}

/// `text` with its `%XX` escapes (and `+` as a space) decoded.
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = text.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_parameters_are_taken_out() {
        let o = UrlOptions::take(
            "postgres://u:p@h/db?sslmode=require&table=orders_inbox&retention=14d&x=1",
            "inbox URL",
        )
        .unwrap();
        assert_eq!(o.url, "postgres://u:p@h/db?sslmode=require&x=1");
        assert_eq!(o.table.as_deref(), Some("orders_inbox"));
        assert_eq!(o.retention.as_deref(), Some("14d"));
        let o = UrlOptions::take("redis://h/0?prefix=orders%3Ainbox%3A", "inbox URL").unwrap();
        assert_eq!(o.url, "redis://h/0");
        assert_eq!(o.prefix.as_deref(), Some("orders:inbox:"));
        let o = UrlOptions::take(
            "redis-cluster://a:7000,b:7001?partitions=32&prefix=x:",
            "inbox URL",
        )
        .unwrap();
        assert_eq!(o.url, "redis-cluster://a:7000,b:7001");
        assert_eq!(o.partitions.as_deref(), Some("32"));
        let o = UrlOptions::take("sqlite://inbox.db", "inbox URL").unwrap();
        assert_eq!(
            o,
            UrlOptions {
                url: "sqlite://inbox.db".into(),
                ..UrlOptions::default()
            }
        );
    }

    #[test]
    fn bad_parameters_are_config_errors_without_the_url() {
        for url in [
            "postgres://u:secret@h/db?table=",
            "postgres://u:secret@h/db?table=a&table=b",
            "postgres://u:secret@h/db?table=%zz",
        ] {
            let error = UrlOptions::take(url, "inbox URL").unwrap_err().to_string();
            assert!(!error.contains("secret"), "{error}");
        }
    }
}
