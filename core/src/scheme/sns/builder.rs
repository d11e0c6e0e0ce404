//! [`SnsBuilder`]: the settings of an [`Sns`] verifier.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use std::collections::HashMap;

use super::cache::{CacheSettings, KeyCache};
use super::fetch::certificate_key;
use super::host::{HostPolicy, https_parts, is_certificate_path};
use super::{
    CertificateFetcher, ConfirmationHook, DEFAULT_CACHE_CAPACITY, DEFAULT_CACHE_TTL,
    DEFAULT_FAILURE_TTL, DEFAULT_FETCH_WINDOW, DEFAULT_MAX_FETCHES, DEFAULT_MAX_KNOWN_FETCHES,
    DEFAULT_STALE_TTL, SignatureVersion, Sns, SnsMessage,
};
use crate::ConfigError;

/// Builds an [`Sns`] verifier.
#[must_use]
pub struct SnsBuilder {
    fetcher: Arc<dyn CertificateFetcher>,
    regions: Option<Vec<String>>,
    hosts: Vec<String>,
    topics: Vec<String>,
    any_topic: bool,
    max_age: Option<Duration>,
    cache_ttl: Duration,
    cache_capacity: usize,
    on_confirmation: Option<ConfirmationHook>,
    failure_ttl: Duration,
    fetch_rate: (u32, Duration),
    known_fetch_rate: (u32, Duration),
    stale_ttl: Duration,
    /// Certificates given at build time: their URL and PEM or DER bytes.
    pinned: Vec<(String, Vec<u8>)>,
    /// URLs of certificates declared known at build time.
    declared: Vec<String>,
    min_version: u8,
}

impl fmt::Debug for SnsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnsBuilder")
            .field("regions", &self.regions)
            .field("hosts", &self.hosts)
            .field("topics", &self.topics.len())
            .field("any_topic", &self.any_topic)
            .field("max_age", &self.max_age)
            .field("pinned_certificates", &self.pinned.len())
            .field("known_certificate_urls", &self.declared)
            .finish_non_exhaustive()
    }
}

impl SnsBuilder {
    /// The defaults, around `fetcher`.
    pub(super) fn new(fetcher: Arc<dyn CertificateFetcher>) -> Self {
        Self {
            fetcher,
            regions: None,
            hosts: Vec::new(),
            topics: Vec::new(),
            any_topic: false,
            max_age: None,
            cache_ttl: DEFAULT_CACHE_TTL,
            cache_capacity: DEFAULT_CACHE_CAPACITY,
            on_confirmation: None,
            failure_ttl: DEFAULT_FAILURE_TTL,
            fetch_rate: (DEFAULT_MAX_FETCHES, DEFAULT_FETCH_WINDOW),
            known_fetch_rate: (DEFAULT_MAX_KNOWN_FETCHES, DEFAULT_FETCH_WINDOW),
            stale_ttl: DEFAULT_STALE_TTL,
            pinned: Vec::new(),
            declared: Vec::new(),
            min_version: 1,
        }
    }

    /// Accepts messages of this topic (call once per topic). At least one
    /// topic, or [`any_topic`](Self::any_topic), is required.
    pub fn topic_arn(mut self, topic_arn: impl Into<String>) -> Self {
        self.topics.push(topic_arn.into());
        self
    }

    /// Accepts messages of any topic: anyone with an AWS account could then
    /// have SNS deliver their own topic's messages to you. Prefer
    /// [`topic_arn`](Self::topic_arn).
    pub fn any_topic(mut self) -> Self {
        self.any_topic = true;
        self
    }

    /// Allows certificates only from `sns.<region>.amazonaws.com` (or `.com.cn`)
    /// for these regions (call once per region). By default any region-shaped
    /// name (`us-east-1`, `cn-north-1`, `us-gov-west-1`) is allowed.
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.regions
            .get_or_insert_with(Vec::new)
            .push(region.into().to_ascii_lowercase());
        self
    }

    /// Also allows this exact host (a partition with another domain, a
    /// VPC endpoint). Certificates still have to be `https` and at an SNS
    /// certificate path.
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.hosts.push(host.into().to_ascii_lowercase());
        self
    }

    /// Refuses messages whose `Timestamp` is further than this from now
    /// (either side). Off by default: SNS retries a delivery with its
    /// original timestamp for as long as the subscription's retry policy says
    /// (up to an hour and more), and `MessageId` dedup is the replay guard.
    pub fn max_age(mut self, max_age: Duration) -> Self {
        self.max_age = Some(max_age);
        self
    }

    /// How long a fetched certificate is fresh (default 24 h): past that, it
    /// is fetched again when next needed, and its key kept as the last good
    /// one (see [`stale_ttl`](Self::stale_ttl)). Zero disables the cache:
    /// nothing is kept, and no path becomes known by verifying.
    pub fn cache_ttl(mut self, ttl: Duration) -> Self {
        self.cache_ttl = ttl;
        self
    }

    /// How many fetched certificates are kept, fresh or stale (default 64;
    /// pinned ones do not count). When full, keys past the stale window go
    /// first, then those of paths that never verified, oldest first.
    pub fn cache_capacity(mut self, capacity: usize) -> Self {
        self.cache_capacity = capacity;
        self
    }

    /// Hands each verified `SubscriptionConfirmation` to `hook`, and has a
    /// receive pipeline answer it `200` itself, in both modes, without
    /// storing it or running the handler (see
    /// [`Handshake`](crate::Handshake)). Confirming is an outbound call
    /// your application must allow: GET the message's `SubscribeURL` (the
    /// hook runs only when it is `https` on an allowed SNS host) or call
    /// `ConfirmSubscription` with its `Token`, from a task of yours (the
    /// hook must not block). Without a hook, confirmations reach the
    /// handler (or the inbox) like any message.
    pub fn on_subscription_confirmation(
        mut self,
        hook: impl Fn(SnsMessage) + Send + Sync + 'static,
    ) -> Self {
        self.on_confirmation = Some(Arc::new(hook));
        self
    }

    /// How long a failed certificate fetch (an error, or an answer that is
    /// not a certificate) is remembered: meanwhile messages naming that
    /// certificate are answered `503` without fetching (default 30 s; SNS
    /// retries later). Zero: every such message fetches again.
    pub fn failure_ttl(mut self, ttl: Duration) -> Self {
        self.failure_ttl = ttl;
        self
    }

    /// At most `max` fetches of certificates whose path is not known start
    /// per `window` (default 5 per minute); past that, messages naming such
    /// a certificate are answered `503` without fetching. A path is known
    /// once a message verified with its key, or when given to
    /// [`certificate`](Self::certificate) or
    /// [`known_certificate_url`](Self::known_certificate_url): those are
    /// fetched from their own budget ([`known_fetch_rate`](Self::known_fetch_rate)),
    /// so that forged messages naming made-up certificates, which spend this
    /// one, never keep a known certificate from being fetched.
    pub fn fetch_rate(mut self, max: u32, window: Duration) -> Self {
        self.fetch_rate = (max, window);
        self
    }

    /// At most `max` fetches of known certificates (see
    /// [`fetch_rate`](Self::fetch_rate)) start per `window` (default 10 per
    /// minute). A known certificate is fetched from the URL it was fetched
    /// from (or declared at), whatever host a message names, one fetch at a
    /// time, and not again within [`failure_ttl`](Self::failure_ttl) of a
    /// failure: so only a few known paths draw on this budget.
    pub fn known_fetch_rate(mut self, max: u32, window: Duration) -> Self {
        self.known_fetch_rate = (max, window);
        self
    }

    /// How long past [`cache_ttl`](Self::cache_ttl) the last good key of a
    /// certificate is still used while it cannot be fetched again (the fetch
    /// fails, failed recently, or its budget is spent); default 7 days. A
    /// refresh is tried first, each time the key is needed past its TTL.
    /// Stale keys count towards [`cache_capacity`](Self::cache_capacity);
    /// zero: a key past its TTL is not used.
    pub fn stale_ttl(mut self, ttl: Duration) -> Self {
        self.stale_ttl = ttl;
        self
    }

    /// Pins a certificate: messages naming `url`'s certificate path (on any
    /// allowed host) are verified with the key of `certificate` (PEM or DER,
    /// the body served at `url`), never fetched, never evicted. For the
    /// certificates your topics sign with (the `SigningCertURL` of their
    /// messages), so that a start or a deploy needs no fetch. A certificate
    /// AWS rotates to is fetched as any other, from the budget of
    /// [`fetch_rate`](Self::fetch_rate); declare it with
    /// [`known_certificate_url`](Self::known_certificate_url) when you know
    /// its URL in advance.
    pub fn certificate(mut self, url: impl Into<String>, certificate: impl AsRef<[u8]>) -> Self {
        self.pinned
            .push((url.into(), certificate.as_ref().to_vec()));
        self
    }

    /// Declares the certificate at `url` known before any message verified
    /// with it: it is fetched from `url` (whatever host a message names) and
    /// from the budget of [`known_fetch_rate`](Self::known_fetch_rate), which
    /// forged messages naming made-up certificates cannot spend.
    pub fn known_certificate_url(mut self, url: impl Into<String>) -> Self {
        self.declared.push(url.into());
        self
    }

    /// Refuses messages signed with an older `SignatureVersion` (`400`):
    /// `2` accepts only SHA256withRSA, `1` (the default) also SHA1withRSA.
    /// Recommended: set the topic's `SignatureVersion` attribute to `2` and
    /// call `require_signature_version(2)`.
    pub fn require_signature_version(mut self, version: u8) -> Self {
        self.min_version = version;
        self
    }

    /// The verifier.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Setting`] when neither a topic nor `any_topic` was
    /// given, or a region or topic is empty.
    pub fn build(self) -> Result<Sns, ConfigError> {
        if self.topics.is_empty() && !self.any_topic {
            return Err(ConfigError::Setting(
                "name the accepted topic ARNs (topic_arn) or allow any_topic",
            ));
        }
        let min_version = match self.min_version {
            1 => SignatureVersion::V1,
            2 => SignatureVersion::V2,
            _ => {
                return Err(ConfigError::Setting(
                    "require_signature_version takes 1 or 2",
                ));
            }
        };
        if self.topics.iter().any(String::is_empty)
            || self.hosts.iter().any(String::is_empty)
            || self.regions.iter().flatten().any(String::is_empty)
        {
            return Err(ConfigError::Setting("empty topic, region or host"));
        }
        let hosts = HostPolicy {
            regions: self.regions,
            hosts: self.hosts,
        };
        // Each pinned or declared URL: `https` on an allowed host, at an SNS
        // certificate path; keyed by that path (lowercase host for the URL).
        let certificate_url = |url: &str| {
            https_parts(url)
                .filter(|(host, path)| hosts.allows(host) && is_certificate_path(path))
                .map(|(host, path)| (path.to_owned(), format!("https://{host}{path}")))
                .ok_or(ConfigError::Setting(
                    "a pinned or known certificate URL is not https on an allowed SNS host at an SNS certificate path",
                ))
        };
        let mut pinned = HashMap::new();
        for (url, certificate) in &self.pinned {
            let (path, _) = certificate_url(url)?;
            let key = certificate_key(certificate).ok_or(ConfigError::Invalid {
                what: "SNS certificate",
                reason: "not an X.509 certificate with an RSA key",
            })?;
            pinned.insert(path, Arc::new(key));
        }
        let declared = (self.declared.iter())
            .map(|url| certificate_url(url))
            .collect::<Result<HashMap<_, _>, _>>()?;
        Ok(Sns {
            fetcher: self.fetcher,
            hosts,
            topics: (!self.any_topic).then_some(self.topics),
            max_age: self.max_age,
            on_confirmation: self.on_confirmation,
            min_version,
            cache: KeyCache::new(CacheSettings {
                ttl: self.cache_ttl,
                stale_ttl: self.stale_ttl,
                capacity: self.cache_capacity,
                failure_ttl: self.failure_ttl,
                new_rate: self.fetch_rate,
                known_rate: self.known_fetch_rate,
                pinned,
                declared,
            }),
        })
    }
}
