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

/// Refuses a request a browser marks as coming from another site: a
/// `Sec-Fetch-Site` other than `same-origin` (or `none`, for
/// [`Client::Api`]), or an `Origin` whose `host[:port]` is neither `host`
/// nor one of `allowed` (exact origins, `https://ops.example.com`).
pub(crate) fn check_origin(
    headers: &HeaderMap,
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
            let origin_host = origin.split_once("://").map(|(_, rest)| rest);
            match (origin_host, host) {
                (Some(origin_host), Some(host)) if origin_host.eq_ignore_ascii_case(host) => Ok(()),
                _ => Err("cross-origin request refused (Origin)"),
            }
        }
        None if site.is_some() || client == Client::Api => Ok(()),
        None => Err("request without Origin refused"),
    }
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
            check_origin(&headers(pairs), HOST, allowed, Client::Browser)
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
            check_origin(&headers(pairs), HOST, &[], Client::Api)
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
                &[],
                Client::Api
            )
            .is_err(),
            "no host to compare with"
        );
    }
}
