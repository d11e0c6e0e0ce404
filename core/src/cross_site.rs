//! Cross-site request checks shared by the console's forms and the inbox
//! admin API's state-changing requests: the browser's own `Origin` and
//! `Sec-Fetch-Site` headers, which a page on another site cannot forge.

use http::HeaderMap;

/// What a request that carries no browser header at all is taken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Client {
    /// A browser posting a form (the console): `Sec-Fetch-Site` must be
    /// `same-origin`, and a request with neither `Origin` nor
    /// `Sec-Fetch-Site` is refused (every current browser sends `Origin`
    /// with a `POST`).
    #[cfg_attr(
        not(feature = "console"),
        allow(dead_code, reason = "only the console's forms are checked so")
    )]
    Browser,
    /// An API client (the admin API): `Sec-Fetch-Site: none` (a request the
    /// user started, not a page) passes too, and so does a request with
    /// neither header (curl, a script): the API's required header is what
    /// stops a cross-site form.
    Api,
}

/// Where a request says it was sent to: its host (`Host`, or HTTP/2's
/// `:authority` from the adapter) and the scheme the adapter knows. The
/// console's and the admin API's requests both carry one, and check it with
/// [`Site::check`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Site<'a> {
    pub(crate) host: Option<&'a str>,
    pub(crate) scheme: Option<&'a str>,
}

impl<'a> Site<'a> {
    /// The site of a request with these headers: its `Host`, no scheme.
    pub(crate) fn of(headers: &'a HeaderMap) -> Self {
        Self {
            host: headers
                .get(http::header::HOST)
                .and_then(|v| v.to_str().ok()),
            scheme: None,
        }
    }

    /// `host` in place of the `Host` header's, when the adapter has one.
    pub(crate) fn with_host(mut self, host: Option<&'a str>) -> Self {
        if host.is_some() {
            self.host = host;
        }
        self
    }

    /// `scheme`, when the adapter knows it.
    pub(crate) fn with_scheme(mut self, scheme: Option<&'a str>) -> Self {
        if scheme.is_some() {
            self.scheme = scheme;
        }
        self
    }

    /// [`check_origin`] against this site.
    pub(crate) fn check(
        self,
        headers: &HeaderMap,
        allowed: &[String],
        client: Client,
    ) -> Result<(), &'static str> {
        check_origin(headers, self.scheme, self.host, allowed, client)
    }
}

/// Refuses a request a browser marks as coming from another site: a
/// `Sec-Fetch-Site` other than `same-origin` (or `none`, for
/// [`Client::Api`]), or an `Origin` that is neither the request's own nor
/// one of `allowed` (exact origins, `https://ops.example.com`).
///
/// The request's own origin is its scheme, `host` and port. The scheme is
/// the first `proto` of `Forwarded`, else the first `X-Forwarded-Proto`
/// (set by a proxy that ends TLS; a page cannot add either to a request it
/// sends without a CORS preflight), else `scheme` (the adapter's: the URI's
/// scheme, or the server's TLS); a default port (`:443`, `:80`) is the same
/// as none. When nothing tells the scheme (HTTP/1 without a proxy header),
/// only `host[:port]` is compared.
pub(crate) fn check_origin(
    headers: &HeaderMap,
    scheme: Option<&str>,
    host: Option<&str>,
    allowed: &[String],
    client: Client,
) -> Result<(), &'static str> {
    let site = headers.get("sec-fetch-site").map(|v| v.as_bytes());
    if let Some(site) = site {
        let same = site == b"same-origin" || (client == Client::Api && site == b"none");
        if !same {
            return Err("cross-site request refused (Sec-Fetch-Site)");
        }
    }
    match headers.get(http::header::ORIGIN) {
        Some(origin) => {
            let origin = origin.to_str().unwrap_or("");
            if allowed.iter().any(|a| a.eq_ignore_ascii_case(origin)) {
                return Ok(());
            }
            let scheme = forwarded_proto(headers).or(scheme);
            match (origin.split_once("://"), host) {
                (Some((origin_scheme, origin_host)), Some(host))
                    if same_origin(origin_scheme, origin_host, scheme, host) =>
                {
                    Ok(())
                }
                _ => Err("cross-origin request refused (Origin)"),
            }
        }
        None if site.is_some() || client == Client::Api => Ok(()),
        None => Err("request without Origin refused"),
    }
}

/// Whether `origin_scheme://origin_host` is the request's origin: with a
/// known `scheme`, the same scheme and the same host and port (a default
/// port written or not); without, the same `host[:port]` as written.
fn same_origin(origin_scheme: &str, origin_host: &str, scheme: Option<&str>, host: &str) -> bool {
    let Some(scheme) = scheme else {
        return origin_host.eq_ignore_ascii_case(host);
    };
    if !origin_scheme.eq_ignore_ascii_case(scheme) {
        return false;
    }
    let default_port = if scheme.eq_ignore_ascii_case("https") {
        ":443"
    } else if scheme.eq_ignore_ascii_case("http") {
        ":80"
    } else {
        ""
    };
    let bare = |h: &'_ str| -> String {
        let h = h.to_ascii_lowercase();
        match h.strip_suffix(default_port) {
            Some(stripped) if !default_port.is_empty() => stripped.to_owned(),
            _ => h,
        }
    };
    bare(origin_host) == bare(host)
}

/// The scheme a proxy says the client used: the first hop's `proto` in
/// `Forwarded` (RFC 7239), else the first `X-Forwarded-Proto`.
fn forwarded_proto(headers: &HeaderMap) -> Option<&str> {
    if let Some(forwarded) = headers.get(http::header::FORWARDED) {
        let first_hop = forwarded.to_str().ok()?.split(',').next()?;
        let proto = first_hop.split(';').find_map(|pair| {
            let (name, value) = pair.split_once('=')?;
            name.trim()
                .eq_ignore_ascii_case("proto")
                .then(|| value.trim().trim_matches('"'))
        });
        if let Some(proto) = proto.filter(|p| !p.is_empty()) {
            return Some(proto);
        }
    }
    let proto = headers.get("x-forwarded-proto")?.to_str().ok()?;
    Some(proto.split(',').next()?.trim()).filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    const HOST: Option<&str> = Some("ops.example:8080");

    #[test]
    fn browser_forms() {
        let check = |pairs: &[(&'static str, &'static str)], allowed: &[String]| {
            check_origin(&headers(pairs), None, HOST, allowed, Client::Browser)
        };
        assert!(check(&[("origin", "http://ops.example:8080")], &[]).is_ok());
        assert!(check(&[("origin", "http://evil.example")], &[]).is_err());
        assert!(check(&[("origin", "null")], &[]).is_err());
        assert!(check(&[], &[]).is_err());
        assert!(check(&[("sec-fetch-site", "same-origin")], &[]).is_ok());
        assert!(
            check(
                &[
                    ("sec-fetch-site", "cross-site"),
                    ("origin", "http://ops.example:8080")
                ],
                &[]
            )
            .is_err()
        );
        assert!(check(&[("sec-fetch-site", "same-site")], &[]).is_err());
        assert!(check(&[("sec-fetch-site", "none")], &[]).is_err());
        let allowed = ["https://ops.example.com".to_owned()];
        assert!(check(&[("origin", "https://ops.example.com")], &allowed).is_ok());
    }

    #[test]
    fn api_clients() {
        let check = |pairs: &[(&'static str, &'static str)]| {
            check_origin(&headers(pairs), None, HOST, &[], Client::Api)
        };
        // curl, a script: no browser header at all.
        assert!(check(&[]).is_ok());
        assert!(check(&[("sec-fetch-site", "none")]).is_ok());
        assert!(check(&[("sec-fetch-site", "same-origin")]).is_ok());
        assert!(check(&[("sec-fetch-site", "cross-site")]).is_err());
        assert!(check(&[("sec-fetch-site", "same-site")]).is_err());
        assert!(check(&[("origin", "http://ops.example:8080")]).is_ok());
        assert!(check(&[("origin", "http://ops.example:9090")]).is_err());
        assert!(check(&[("origin", "null")]).is_err());
        assert!(
            check_origin(
                &headers(&[("origin", "http://ops.example:8080")]),
                None,
                None,
                &[],
                Client::Api
            )
            .is_err(),
            "no host to compare with"
        );
    }

    /// Issue 35, item 9: with a known scheme, `Origin` must name it.
    #[test]
    fn schemes() {
        let check = |pairs: &[(&'static str, &'static str)], scheme, host| {
            check_origin(&headers(pairs), scheme, Some(host), &[], Client::Api)
        };
        let https = Some("https");
        assert!(check(&[("origin", "https://ops.example")], https, "ops.example").is_ok());
        assert!(check(&[("origin", "http://ops.example")], https, "ops.example").is_err());
        assert!(
            check(
                &[("origin", "https://ops.example")],
                Some("http"),
                "ops.example"
            )
            .is_err()
        );
        // Default ports, written or not.
        assert!(
            check(
                &[("origin", "https://ops.example")],
                https,
                "ops.example:443"
            )
            .is_ok()
        );
        assert!(
            check(
                &[("origin", "https://ops.example:443")],
                https,
                "OPS.example"
            )
            .is_ok()
        );
        assert!(
            check(
                &[("origin", "http://ops.example")],
                Some("http"),
                "ops.example:80"
            )
            .is_ok()
        );
        assert!(
            check(
                &[("origin", "https://ops.example:80")],
                https,
                "ops.example"
            )
            .is_err()
        );
        // A proxy's header wins over the adapter's scheme.
        let proxied = [
            ("origin", "https://ops.example"),
            ("x-forwarded-proto", "https, http"),
        ];
        assert!(check(&proxied, Some("http"), "ops.example").is_ok());
        let forwarded = [
            ("origin", "http://ops.example"),
            (
                "forwarded",
                "for=192.0.2.1;Proto=\"https\", for=10.0.0.1;proto=http",
            ),
        ];
        assert!(check(&forwarded, Some("http"), "ops.example").is_err());
        // Unknown: host and port only, as written.
        assert!(check(&[("origin", "http://ops.example")], None, "ops.example").is_ok());
        assert!(check(&[("origin", "https://ops.example")], None, "ops.example").is_ok());
        assert!(
            check(
                &[("origin", "https://ops.example")],
                None,
                "ops.example:443"
            )
            .is_err()
        );
    }
}
