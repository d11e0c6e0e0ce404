//! Which URLs may serve certificates and confirmation URLs: `https` on an
//! allowed SNS host, at an SNS certificate path.

/// Which hosts may serve certificates and confirmation URLs.
#[derive(Debug, Clone)]
pub(super) struct HostPolicy {
    /// `None`: any region-shaped name.
    pub(super) regions: Option<Vec<String>>,
    /// Exact hosts allowed besides (lowercase).
    pub(super) hosts: Vec<String>,
}

impl HostPolicy {
    pub(super) fn allows(&self, host: &str) -> bool {
        if self.hosts.iter().any(|h| h == host) {
            return true;
        }
        let Some(rest) = host.strip_prefix("sns.") else {
            return false;
        };
        let Some(region) = rest
            .strip_suffix(".amazonaws.com")
            .or_else(|| rest.strip_suffix(".amazonaws.com.cn"))
        else {
            return false;
        };
        match &self.regions {
            Some(regions) => regions.iter().any(|r| r == region),
            None => is_region(region),
        }
    }
}

/// `us-east-1`, `cn-north-1`, `us-gov-west-1`: lowercase words and a number,
/// joined by hyphens.
pub(super) fn is_region(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() >= 3
        && s.len() <= 32
        && parts[..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts[parts.len() - 1].bytes().all(|b| b.is_ascii_digit())
        && !parts[parts.len() - 1].is_empty()
}

/// The lowercase host and the path-and-query of an `https` URL without user
/// info or port; `None` for anything else.
pub(super) fn https_parts(url: &str) -> Option<(String, &str)> {
    let scheme_len = "https://".len();
    if url.len() < scheme_len || !url[..scheme_len].eq_ignore_ascii_case("https://") {
        return None;
    }
    let rest = &url[scheme_len..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (host, path) = rest.split_at(end);
    if host.is_empty()
        || !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
    {
        return None;
    }
    Some((host.to_ascii_lowercase(), path))
}

/// Whether `path` is what SNS certificates are served at:
/// `/SimpleNotificationService-<name>.pem`, nothing else.
pub(super) fn is_certificate_path(path: &str) -> bool {
    path.strip_prefix("/SimpleNotificationService-")
        .and_then(|name| name.strip_suffix(".pem"))
        .is_some_and(|name| {
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_paths() {
        let any = HostPolicy {
            regions: None,
            hosts: vec![],
        };
        for ok in [
            "sns.us-east-1.amazonaws.com",
            "sns.cn-north-1.amazonaws.com.cn",
            "sns.us-gov-west-1.amazonaws.com",
        ] {
            assert!(any.allows(ok), "{ok}");
        }
        for bad in [
            "sns.us-east-1.amazonaws.com.evil.com",
            "evil.com",
            "sns.amazonaws.com",
            "sns..amazonaws.com",
            "sns.us-east-x.amazonaws.com",
            "sns.evil.com/x.amazonaws.com",
            "xsns.us-east-1.amazonaws.com",
            "sns.us-east-1.amazonaws.co",
        ] {
            assert!(!any.allows(bad), "{bad}");
        }
        let eu = HostPolicy {
            regions: Some(vec!["eu-west-1".into()]),
            hosts: vec!["sns.example.test".into()],
        };
        assert!(eu.allows("sns.eu-west-1.amazonaws.com"));
        assert!(!eu.allows("sns.us-east-1.amazonaws.com"));
        assert!(eu.allows("sns.example.test"));

        assert_eq!(
            https_parts("HTTPS://SNS.us-east-1.amazonaws.com/x.pem"),
            Some(("sns.us-east-1.amazonaws.com".into(), "/x.pem"))
        );
        for bad in [
            "http://sns.us-east-1.amazonaws.com/x.pem",
            "https://user@sns.us-east-1.amazonaws.com/x.pem",
            "https://sns.us-east-1.amazonaws.com:8443/x.pem",
            "https:///x.pem",
            "sns.us-east-1.amazonaws.com/x.pem",
        ] {
            assert_eq!(https_parts(bad), None, "{bad}");
        }
        assert!(is_certificate_path(
            "/SimpleNotificationService-7ff5318490ec183fbaddaa2a969abfda.pem"
        ));
        for bad in [
            "/SimpleNotificationService-.pem",
            "/SimpleNotificationService-a.pem?x=1",
            "/SimpleNotificationService-../a.pem",
            "/other.pem",
            "/SimpleNotificationService-a.crt",
            "",
        ] {
            assert!(!is_certificate_path(bad), "{bad}");
        }
    }

    #[test]
    fn regions_have_a_shape() {
        assert!(is_region("us-east-1"));
        assert!(is_region("ap-southeast-12"));
        assert!(!is_region("us-east"));
        assert!(!is_region("US-east-1"));
        assert!(!is_region("us--1"));
        assert!(!is_region("us-east-1a"));
    }
}
