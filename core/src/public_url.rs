//! The public URL a provider called, for the schemes that sign it.

use std::fmt;

use http::HeaderName;

use crate::{ConfigError, RequestHead, VerifyError};

static HOST: HeaderName = HeaderName::from_static("host");
static FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
static FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// How to rebuild the URL a provider called (Twilio, Square, Mandrill and
/// HubSpot sign it).
///
/// Behind a reverse proxy or a load balancer the request the service sees
/// is not the one the provider sent: the `Host` header may name an internal
/// host, TLS may have ended at the proxy. So the URL is rebuilt from
/// configuration, and request headers are trusted only when you say so:
///
/// * [`base`](Self::base) (the usual choice): the public origin, perhaps with
///   a path prefix the proxy strips, followed by the request's path and query;
/// * [`exact`](Self::exact): the one URL registered with the provider
///   (Square's notification URL), whatever the request line says;
/// * [`from_host_header`](Self::from_host_header): a fixed scheme and the
///   `Host` header, for a service reached directly;
/// * [`from_forwarded_headers`](Self::from_forwarded_headers):
///   `X-Forwarded-Proto` and `X-Forwarded-Host`, only behind a proxy that
///   sets them (a client can send them too).
///
/// ```
/// use webhooks_core::{PublicUrl, RequestHead};
///
/// let public = PublicUrl::base("https://hooks.example.com/")?;
/// let headers = http::HeaderMap::new();
/// let head = RequestHead::from_path_and_query("/twilio/sms?x=1", &headers);
/// assert_eq!(head.url(&public)?, "https://hooks.example.com/twilio/sms?x=1");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A `base` or `exact` URL may carry HTTP Basic credentials
/// (`https://user:pass@host/…`), as a webhook URL registered with Twilio can:
/// the provider signs the URL with them. Its `Debug` output shows the
/// password as `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicUrl(Source);

impl fmt::Debug for PublicUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted = |url: &str| -> String {
            let Some((scheme, rest)) = url.split_once("://") else {
                return url.to_owned();
            };
            let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
            match authority.rfind('@') {
                Some(at) => {
                    let user = authority[..at].split(':').next().unwrap_or_default();
                    let password = if authority[..at].contains(':') {
                        ":***"
                    } else {
                        ""
                    };
                    format!("{scheme}://{user}{password}@{}", &rest[at + 1..])
                }
                None => url.to_owned(),
            }
        };
        match &self.0 {
            Source::Base(url) => f.debug_tuple("Base").field(&redacted(url)).finish(),
            Source::Exact(url) => f.debug_tuple("Exact").field(&redacted(url)).finish(),
            Source::Host(scheme) => f.debug_tuple("Host").field(scheme).finish(),
            Source::Forwarded => f.write_str("Forwarded"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    Base(String),
    Exact(String),
    Host(&'static str),
    Forwarded,
}

impl PublicUrl {
    /// The public origin (`https://hooks.example.com`), optionally with a
    /// path prefix (`https://example.com/api` when the proxy strips `/api`);
    /// the request's path and query are appended. A trailing `/` is dropped.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Setting`] unless it is an `http`/`https` URL without a
    /// query or fragment.
    pub fn base(url: impl Into<String>) -> Result<Self, ConfigError> {
        let mut url = checked(url.into())?;
        while url.ends_with('/') {
            url.pop();
        }
        Ok(Self(Source::Base(url)))
    }

    /// The whole URL as registered with the provider, used for every
    /// request whatever its path and query.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Setting`] unless it is an `http`/`https` URL without a fragment.
    pub fn exact(url: impl Into<String>) -> Result<Self, ConfigError> {
        let url = url.into();
        let origin_and_path = url.split('?').next().unwrap_or_default().to_owned();
        checked(origin_and_path)?;
        if url.contains('#') {
            return Err(ConfigError::Setting("public URL has a fragment"));
        }
        Ok(Self(Source::Exact(url)))
    }

    /// `{scheme}://{Host header}{path}{?query}`: trusts the `Host` header,
    /// so use it only where the service is reached directly (or the proxy
    /// forwards the original `Host`).
    ///
    /// # Panics
    ///
    /// Unless `scheme` is `"http"` or `"https"`.
    #[must_use]
    pub fn from_host_header(scheme: &'static str) -> Self {
        assert!(
            matches!(scheme, "http" | "https"),
            "scheme must be http or https"
        );
        Self(Source::Host(scheme))
    }

    /// `{X-Forwarded-Proto}://{X-Forwarded-Host}{path}{?query}` (the first
    /// value of each; `https` and the `Host` header when absent). Use it only
    /// behind a proxy that overwrites these headers: anyone can send them.
    #[must_use]
    pub fn from_forwarded_headers() -> Self {
        Self(Source::Forwarded)
    }

    /// Whether the URL ignores the request line (an [`exact`](Self::exact) URL).
    #[must_use]
    pub fn is_exact(&self) -> bool {
        matches!(self.0, Source::Exact(_))
    }

    pub(crate) fn url_of(&self, head: &RequestHead<'_>) -> Result<String, VerifyError> {
        let (scheme, host) = match &self.0 {
            Source::Exact(url) => return Ok(url.clone()),
            Source::Base(base) => return Ok(join(base, "", "", head)),
            Source::Host(scheme) => (*scheme, host_from(head, &HOST, "host")?),
            Source::Forwarded => {
                let scheme = match first_value(head, &FORWARDED_PROTO, "x-forwarded-proto")? {
                    None => "https",
                    Some(p) if p.eq_ignore_ascii_case("https") => "https",
                    Some(p) if p.eq_ignore_ascii_case("http") => "http",
                    Some(_) => {
                        return Err(VerifyError::malformed(
                            "x-forwarded-proto",
                            "not http or https",
                        ));
                    }
                };
                let host = match head.headers.get(&FORWARDED_HOST).is_some() {
                    true => host_from(head, &FORWARDED_HOST, "x-forwarded-host")?,
                    false => host_from(head, &HOST, "host")?,
                };
                (scheme, host)
            }
        };
        Ok(join(scheme, "://", host, head))
    }
}

fn join(a: &str, b: &str, c: &str, head: &RequestHead<'_>) -> String {
    let query = head.query.map_or(0, |q| q.len() + 1);
    let mut url = String::with_capacity(a.len() + b.len() + c.len() + head.path.len() + query);
    url.push_str(a);
    url.push_str(b);
    url.push_str(c);
    url.push_str(head.path);
    if let Some(q) = head.query {
        url.push('?');
        url.push_str(q);
    }
    url
}

fn checked(url: String) -> Result<String, ConfigError> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or(ConfigError::Setting(
            "public URL must start with https:// or http://",
        ))?;
    let authority = rest.split('/').next().unwrap_or_default();
    // Optional `user[:password]@` before the host.
    let host = match authority.rsplit_once('@') {
        Some((userinfo, host)) if !userinfo.is_empty() && plain_userinfo(userinfo) => host,
        Some(_) => return Err(ConfigError::Setting("public URL has invalid user info")),
        None => authority,
    };
    if host.is_empty() || !plain_host(host) {
        return Err(ConfigError::Setting("public URL has no valid host"));
    }
    if rest.contains(['?', '#']) || rest.bytes().any(|b| !b.is_ascii_graphic()) {
        return Err(ConfigError::Setting(
            "public URL base must not have a query, a fragment or spaces",
        ));
    }
    Ok(url)
}

/// A `host[:port]` with nothing that could change the URL's meaning.
fn plain_host(host: &str) -> bool {
    host.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']' | b'_'))
}

/// RFC 3986 `userinfo`: unreserved, percent-encoded, sub-delims and `:`.
fn plain_userinfo(userinfo: &str) -> bool {
    userinfo.bytes().all(|b| {
        b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'%'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
            )
    })
}

fn first_value<'h>(
    head: &RequestHead<'h>,
    name: &HeaderName,
    shown: &'static str,
) -> Result<Option<&'h str>, VerifyError> {
    match crate::headers::get_str(head.headers, name) {
        None => Ok(None),
        Some(v) => {
            let v = v.map_err(|_| VerifyError::malformed(shown, "not visible ASCII"))?;
            Ok(Some(v.split(',').next().unwrap_or_default().trim()))
        }
    }
}

fn host_from<'h>(
    head: &RequestHead<'h>,
    name: &HeaderName,
    shown: &'static str,
) -> Result<&'h str, VerifyError> {
    let host = first_value(head, name, shown)?.ok_or(VerifyError::MissingHeader(shown))?;
    if host.is_empty() || !plain_host(host) {
        return Err(VerifyError::malformed(shown, "not a plain host"));
    }
    Ok(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn base_appends_path_and_query() {
        let h = headers(&[("host", "internal:8080")]);
        let head = RequestHead::from_path_and_query("/a/b?x=1&y=%20", &h);
        let base = PublicUrl::base("https://example.com/api/").unwrap();
        assert_eq!(
            head.url(&base).unwrap(),
            "https://example.com/api/a/b?x=1&y=%20"
        );
        let exact = PublicUrl::exact("https://example.com/hook?k=v").unwrap();
        assert_eq!(head.url(&exact).unwrap(), "https://example.com/hook?k=v");
        let no_query = RequestHead::new("/a", &h);
        assert_eq!(no_query.url(&base).unwrap(), "https://example.com/api/a");
    }

    #[test]
    fn host_and_forwarded_are_opt_in_and_checked() {
        let h = headers(&[
            ("host", "internal:8080"),
            ("x-forwarded-host", "public.example.com, proxy"),
            ("x-forwarded-proto", "http"),
        ]);
        let head = RequestHead::new("/p", &h);
        assert_eq!(
            head.url(&PublicUrl::from_host_header("https")).unwrap(),
            "https://internal:8080/p"
        );
        assert_eq!(
            head.url(&PublicUrl::from_forwarded_headers()).unwrap(),
            "http://public.example.com/p"
        );
        let evil = headers(&[("host", "evil.com/x?")]);
        assert_eq!(
            RequestHead::new("/p", &evil)
                .url(&PublicUrl::from_host_header("https"))
                .unwrap_err()
                .status(),
            400
        );
        let none = headers(&[]);
        assert_eq!(
            RequestHead::new("/p", &none).url(&PublicUrl::from_forwarded_headers()),
            Err(VerifyError::MissingHeader("host"))
        );
    }

    #[test]
    fn bad_configuration_is_refused() {
        for bad in [
            "example.com",
            "ftp://x",
            "https://",
            "https://a b",
            "https://x/?q",
            "https://x/#f",
            "https://@x",
            "https://u@v@x",
            "https://u p@x",
            "https://u:p@",
        ] {
            assert!(PublicUrl::base(bad).is_err(), "{bad}");
        }
        assert!(PublicUrl::exact("https://x/p?q=1").is_ok());
        assert!(PublicUrl::exact("https://x/p#f").is_err());
    }

    /// Issue 25, item 5: a webhook URL with HTTP Basic credentials, as
    /// Twilio signs it; the password never shows in `Debug`.
    #[test]
    fn credentials_are_kept_and_redacted() {
        let h = headers(&[]);
        let head = RequestHead::from_path_and_query("/myapp.php?foo=1", &h);
        let base = PublicUrl::base("https://user:s3cr%40t@mycompany.com").unwrap();
        assert_eq!(
            head.url(&base).unwrap(),
            "https://user:s3cr%40t@mycompany.com/myapp.php?foo=1"
        );
        let shown = format!("{base:?}");
        assert!(!shown.contains("s3cr"), "{shown}");
        assert!(shown.contains("user:***@mycompany.com"), "{shown}");
        let exact = PublicUrl::exact("https://user@mycompany.com/hook?x=1").unwrap();
        assert_eq!(
            head.url(&exact).unwrap(),
            "https://user@mycompany.com/hook?x=1"
        );
        assert!(format!("{exact:?}").contains("user@mycompany.com/hook?x=1"));
    }
}
