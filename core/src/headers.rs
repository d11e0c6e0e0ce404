//! [`HeaderLookup`]: how the pipeline reads a request's headers, in place,
//! whatever the framework's header map.

use std::sync::OnceLock;

use http::{HeaderMap, HeaderName, HeaderValue};

/// A request's headers as the pipeline and the verifiers read them: the
/// first value of a name, every value of a name, every pair.
///
/// Implemented here for [`http::HeaderMap`] (axum, hyper, tower); an adapter
/// whose framework keeps its own map (actix-web's) implements it over that
/// map, so that a request's headers are read where they are instead of
/// copied first. Names are looked up as [`HeaderName`]s, lower-case, and
/// compared exactly (header names are case-insensitive; both maps store
/// them lower-cased).
///
/// `Sync`, so that a [`RequestHead`](crate::RequestHead) holding one can be
/// kept across an `await` of a `Send` future.
pub trait HeaderLookup: Sync {
    /// The first value of `name`, if the request has one.
    fn get(&self, name: &HeaderName) -> Option<&[u8]>;

    /// The first value of `name` as text, as [`HeaderValue::to_str`]
    /// reads it (visible ASCII, spaces and tabs; otherwise
    /// `Some(Err(NotText))`). The default checks [`get`](Self::get)'s
    /// bytes with [`header_str`]; an implementation whose map validates
    /// more cheaply (http's own `to_str`) answers with that.
    fn get_str(&self, name: &HeaderName) -> Option<Result<&str, NotText>> {
        self.get(name).map(|value| header_str(value).ok_or(NotText))
    }

    /// For each group of names, the first value of the group's first name
    /// that the request has, with that name's index in the group: `out[i]`
    /// answers `groups[i]` (`None`: none of its names), for a scheme that
    /// reads several headers, each under one of a few names. The values
    /// are the bytes received: the scheme checks what it needs as text
    /// ([`header_str`], [`is_text`]).
    ///
    /// The default looks the names up one at a time with [`get`](Self::get),
    /// stopping at each group's first name present. The groups are
    /// `'static` so that a map keyed by another type of name (actix's,
    /// http 0.2) can convert them once and keep them (actix-webhooks keeps
    /// them per thread).
    fn get_first_of<'h>(
        &'h self,
        groups: &'static [&'static [HeaderName]],
        out: &mut [FirstOf<'h>],
    ) {
        first_of_by_lookup(groups, out, |name| self.get(name));
    }

    /// Calls `f` with every value of `name`, in the order received.
    fn for_each_value(&self, name: &HeaderName, f: &mut dyn FnMut(&[u8]));

    /// Calls `f` with every `(name, value)` pair; the values of one name in
    /// the order received.
    fn for_each(&self, f: &mut dyn FnMut(&str, &[u8]));

    /// The headers as an [`http::HeaderMap`], for what needs one (a
    /// [`Verifier`](crate::Verifier) reading `&HeaderMap`, the headers an
    /// inbox keeps): the map itself when it is one, otherwise a copy made
    /// at most once per request ([`CopiedOnDemand`]).
    fn header_map(&self) -> &HeaderMap;
}

impl HeaderLookup for HeaderMap {
    fn get(&self, name: &HeaderName) -> Option<&[u8]> {
        HeaderMap::get(self, name).map(HeaderValue::as_bytes)
    }

    // http's own check: it then needs no UTF-8 pass (`header_str` does,
    // without `unsafe`), which costs axum ≈ 500 instructions a delivery.
    fn get_str(&self, name: &HeaderName) -> Option<Result<&str, NotText>> {
        HeaderMap::get(self, name).map(|value| value.to_str().map_err(|_| NotText))
    }

    fn for_each_value(&self, name: &HeaderName, f: &mut dyn FnMut(&[u8])) {
        for value in self.get_all(name) {
            f(value.as_bytes());
        }
    }

    fn for_each(&self, f: &mut dyn FnMut(&str, &[u8])) {
        for (name, value) in self {
            f(name.as_str(), value.as_bytes());
        }
    }

    fn header_map(&self) -> &HeaderMap {
        self
    }
}

/// What [`HeaderLookup::get_first_of`] found for one group of names: the
/// index in the group of the name found, and its first value's bytes.
pub type FirstOf<'h> = Option<(usize, &'h [u8])>;

/// [`HeaderLookup::get_first_of`] by looking each name up with `get`.
pub fn first_of_by_lookup<'h>(
    groups: &[&[HeaderName]],
    out: &mut [FirstOf<'h>],
    get: impl Fn(&HeaderName) -> Option<&'h [u8]>,
) {
    for (names, slot) in groups.iter().zip(out) {
        *slot = (names.iter().enumerate()).find_map(|(i, name)| get(name).map(|v| (i, v)));
    }
}

/// The most groups of names [`ReadOnce`] reads ahead (the schemes read one
/// to three).
const READ_ONCE_GROUPS: usize = 4;

/// A request's headers with the groups of names its scheme reads on every
/// request ([`Verifier::head_names`]) read once, ahead: the pipeline checks
/// the head before the body and verifies after it, and both readings are
/// then answered from this one (no second lookup, no second text check).
/// Everything else is read from the request's headers.
///
/// [`Verifier::head_names`]: crate::Verifier::head_names
pub(crate) struct ReadOnce<'a> {
    headers: &'a dyn HeaderLookup,
    /// The groups read ahead: empty when none (or more than
    /// [`READ_ONCE_GROUPS`]) were named.
    groups: &'static [&'static [HeaderName]],
    found: [FirstOf<'a>; READ_ONCE_GROUPS],
}

impl<'a> ReadOnce<'a> {
    /// `headers`, with `groups` read.
    pub(crate) fn new(
        headers: &'a dyn HeaderLookup,
        groups: &'static [&'static [HeaderName]],
    ) -> Self {
        let mut found = [None; READ_ONCE_GROUPS];
        let groups = if groups.len() <= READ_ONCE_GROUPS {
            headers.get_first_of(groups, &mut found[..groups.len()]);
            groups
        } else {
            &[]
        };
        Self {
            headers,
            groups,
            found,
        }
    }
}

impl HeaderLookup for ReadOnce<'_> {
    fn get(&self, name: &HeaderName) -> Option<&[u8]> {
        self.headers.get(name)
    }

    fn get_str(&self, name: &HeaderName) -> Option<Result<&str, NotText>> {
        self.headers.get_str(name)
    }

    fn get_first_of<'h>(
        &'h self,
        groups: &'static [&'static [HeaderName]],
        out: &mut [FirstOf<'h>],
    ) {
        // The same list (address and length): what was read ahead.
        if !groups.is_empty() && std::ptr::eq(groups, self.groups) {
            for (slot, found) in out.iter_mut().zip(&self.found) {
                *slot = *found;
            }
        } else {
            self.headers.get_first_of(groups, out);
        }
    }

    fn for_each_value(&self, name: &HeaderName, f: &mut dyn FnMut(&[u8])) {
        self.headers.for_each_value(name, f);
    }

    fn for_each(&self, f: &mut dyn FnMut(&str, &[u8])) {
        self.headers.for_each(f);
    }

    fn header_map(&self) -> &HeaderMap {
        self.headers.header_map()
    }
}

/// A header value that is not text ([`HeaderLookup::get_str`]): a byte
/// outside visible ASCII, space and tab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotText;

/// The value as text when it is what [`HeaderValue::to_str`] accepts
/// (visible ASCII, spaces and tabs), as the verifiers read a header.
///
/// Checks eight bytes at a time (about a fifth of the instructions of
/// `to_str`'s byte loop): the signature and id headers a verifier reads are
/// read on every delivery, twice.
#[must_use]
pub fn header_str(value: &[u8]) -> Option<&str> {
    if is_text(value) {
        // Visible ASCII is UTF-8.
        std::str::from_utf8(value).ok()
    } else {
        None
    }
}

/// Whether every byte is visible ASCII (0x20–0x7e), a space or a tab: what
/// [`HeaderValue::to_str`] accepts (see [`header_str`]), without making a
/// `&str`, for a value read as bytes. Eight bytes at a time.
#[must_use]
pub fn is_text(value: &[u8]) -> bool {
    let byte = |b: &u8| *b == b'\t' || (0x20..0x7f).contains(b);
    let (words, rest) = value.as_chunks::<8>();
    for word in words {
        if !printable_word(*word) && !word.iter().all(byte) {
            return false;
        }
    }
    // The last bytes as one word, overlapping the words checked above,
    // when the value has one: a tail costs no more than a word.
    match value.last_chunk::<8>() {
        Some(last) if !rest.is_empty() && printable_word(*last) => true,
        _ => rest.iter().all(byte),
    }
}

/// A byte of ones in each of a word's eight bytes, and each byte's high bit.
const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);

/// Whether every byte of `word` is printable ASCII, space included
/// (0x20–0x7e), tested on the eight at once.
#[inline]
pub(crate) fn printable_word(word: [u8; 8]) -> bool {
    let x = u64::from_ne_bytes(word);
    // A byte below 0x20 (its high bit set by the subtraction), or above
    // 0x7e (by the addition, or set already). A borrow or a carry between
    // bytes only starts at a byte that is itself out of range, so "none" is
    // exact.
    let below = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
    let above = (x.wrapping_add(ONES) | x) & HIGH;
    (below | above) == 0
}

/// Whether one of `word`'s bytes is `byte`, tested on the eight at once: a
/// zero byte once `byte` is xored away (a borrow only starts at one).
#[inline]
pub(crate) fn word_has(word: [u8; 8], byte: u8) -> bool {
    let x = u64::from_ne_bytes(word) ^ (ONES * u64::from(byte));
    x.wrapping_sub(ONES) & !x & HIGH != 0
}

/// The first value of `name` as text ([`header_str`]): `None` when absent,
/// `Some(Err(()))` when present but not visible ASCII.
pub(crate) fn get_str<'h>(
    headers: &'h (impl HeaderLookup + ?Sized),
    name: &HeaderName,
) -> Option<Result<&'h str, NotText>> {
    headers.get_str(name)
}

/// Every header of `headers` in an [`http::HeaderMap`], in one pass: the
/// values are copied into one buffer and each is split off it (one
/// allocation for all of them rather than one per value). A pair that is
/// not a valid http 1.x name and value is left out.
#[must_use]
pub fn copy_header_map(headers: &(impl HeaderLookup + ?Sized), len_keys: usize) -> HeaderMap {
    let mut values = bytes::BytesMut::with_capacity(HEADER_VALUES_CAPACITY);
    let mut out = HeaderMap::with_capacity(len_keys);
    headers.for_each(&mut |name, value| {
        values.extend_from_slice(value);
        let value = values.split().freeze();
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_maybe_shared(value),
        ) {
            out.append(name, value);
        }
    });
    out
}

/// The header values' buffer of [`copy_header_map`]: most webhook
/// requests' values fit.
pub const HEADER_VALUES_CAPACITY: usize = 512;

/// A framework's own header map read in place, with the
/// [`http::HeaderMap`] copy that [`HeaderLookup::header_map`] answers made
/// only when something asks for it, and once.
///
/// An adapter implements [`ForeignHeaders`] for its framework's map and
/// hands the pipeline a `CopiedOnDemand` of it.
#[derive(Debug)]
pub struct CopiedOnDemand<H> {
    headers: H,
    /// Boxed: made for few requests, and an `http::HeaderMap` inline would
    /// make every request's pipeline future about 90 bytes larger.
    copy: OnceLock<Box<HeaderMap>>,
}

impl<H> CopiedOnDemand<H> {
    /// `headers`, not copied yet.
    pub fn new(headers: H) -> Self {
        Self {
            headers,
            copy: OnceLock::new(),
        }
    }

    /// The framework's map back.
    pub fn into_inner(self) -> H {
        self.headers
    }

    /// The framework's map, to change or take back; the copy, if one was
    /// made, is dropped (it would no longer match).
    pub fn inner_mut(&mut self) -> &mut H {
        self.copy = OnceLock::new();
        &mut self.headers
    }

    /// Whether the copy was made (for tests: the paths that need none make none).
    #[must_use]
    pub fn copied(&self) -> bool {
        self.copy.get().is_some()
    }
}

/// A framework's header map, read in place (see [`CopiedOnDemand`]).
pub trait ForeignHeaders: Sync {
    /// The first value of `name`.
    fn get(&self, name: &HeaderName) -> Option<&[u8]>;
    /// The first value of `name` as text ([`HeaderLookup::get_str`]).
    fn get_str(&self, name: &HeaderName) -> Option<Result<&str, NotText>> {
        self.get(name).map(|value| header_str(value).ok_or(NotText))
    }
    /// [`HeaderLookup::get_first_of`]; the default looks each name up
    /// with [`get`](Self::get).
    fn get_first_of<'h>(
        &'h self,
        groups: &'static [&'static [HeaderName]],
        out: &mut [FirstOf<'h>],
    ) {
        first_of_by_lookup(groups, out, |name| self.get(name));
    }
    /// Calls `f` with every value of `name`, in order.
    fn for_each_value(&self, name: &HeaderName, f: &mut dyn FnMut(&[u8]));
    /// Calls `f` with every `(name, value)` pair.
    fn for_each(&self, f: &mut dyn FnMut(&str, &[u8]));
    /// How many distinct names (the copy's capacity).
    fn len_keys(&self) -> usize;
}

impl<H: ForeignHeaders> HeaderLookup for CopiedOnDemand<H> {
    fn get(&self, name: &HeaderName) -> Option<&[u8]> {
        self.headers.get(name)
    }

    fn get_str(&self, name: &HeaderName) -> Option<Result<&str, NotText>> {
        self.headers.get_str(name)
    }

    fn get_first_of<'h>(
        &'h self,
        groups: &'static [&'static [HeaderName]],
        out: &mut [FirstOf<'h>],
    ) {
        self.headers.get_first_of(groups, out);
    }

    fn for_each_value(&self, name: &HeaderName, f: &mut dyn FnMut(&[u8])) {
        self.headers.for_each_value(name, f);
    }

    fn for_each(&self, f: &mut dyn FnMut(&str, &[u8])) {
        self.headers.for_each(f);
    }

    fn header_map(&self) -> &HeaderMap {
        self.copy
            .get_or_init(|| Box::new(copy_header_map(self, self.headers.len_keys())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_str_accepts_what_to_str_accepts() {
        for b in 0..=255u8 {
            let bytes = [b'a', b, b'z'];
            let Ok(value) = HeaderValue::from_bytes(&bytes) else {
                continue;
            };
            assert_eq!(header_str(&bytes), value.to_str().ok(), "byte {b}");
        }
    }

    proptest::proptest! {
        /// Any bytes (a tab, control bytes, visible ASCII, DEL and
        /// obs-text mixed, in every position of an eight-byte word):
        /// text exactly when `to_str` says so.
        #[test]
        fn header_str_agrees_with_to_str(
            value in proptest::collection::vec(
                proptest::prop_oneof![
                    6 => 0x20u8..0x7f,
                    1 => proptest::sample::select(vec![0u8, 9, 10, 0x1f, 0x7e, 0x7f, 0x80, 0xff]),
                    1 => proptest::num::u8::ANY,
                ],
                0..40,
            )
        ) {
            // A value http refuses (NUL, CR, LF, DEL) is never text either.
            let expected = HeaderValue::from_bytes(&value)
                .ok()
                .and_then(|v| v.to_str().ok().map(str::to_owned));
            proptest::prop_assert_eq!(header_str(&value).map(str::to_owned), expected);
        }
    }

    #[test]
    fn the_http_map_answers_as_itself() {
        let mut map = HeaderMap::new();
        map.append("x-multi", HeaderValue::from_static("one"));
        map.append("x-multi", HeaderValue::from_static("two"));
        map.append("x-raw", HeaderValue::from_bytes(b"\xff\xfe").unwrap());
        let name = HeaderName::from_static("x-multi");
        assert_eq!(HeaderLookup::get(&map, &name), Some(&b"one"[..]));
        let mut all = Vec::new();
        map.for_each_value(&name, &mut |v| all.push(v.to_vec()));
        assert_eq!(all, [b"one".to_vec(), b"two".to_vec()]);
        let raw = HeaderName::from_static("x-raw");
        assert_eq!(get_str(&map, &raw), Some(Err(NotText)));
        assert_eq!(
            HeaderLookup::get(&map, &raw).map(|v| header_str(v).ok_or(NotText)),
            Some(Err(NotText))
        );
        assert!(std::ptr::eq(map.header_map(), &map));
        let copy = copy_header_map(&map, 2);
        assert_eq!(copy, map);
    }
}
