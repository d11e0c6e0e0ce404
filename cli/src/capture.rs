//! A captured request: a raw HTTP/1.1 request file (request line, headers,
//! a blank line, the body), or a headers file and a body file.

use std::path::Path;

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::error::Failure;

/// A captured request.
#[derive(Debug)]
pub(crate) struct Captured {
    /// The request target (`/sms?a=1`), when the capture has a request line.
    pub(crate) target: Option<String>,
    /// The headers.
    pub(crate) headers: HeaderMap,
    /// The body, exactly as captured (cut at `Content-Length` when longer).
    pub(crate) body: Vec<u8>,
    /// Bytes past `Content-Length` that were cut off.
    pub(crate) trailing: usize,
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, Failure> {
    std::fs::read(path)
        .map_err(|e| Failure::usage(format!("cannot read {what} {}: {e}", path.display())))
}

/// The head's lines: an optional request line, then `Name: value` lines.
fn parse_head(head: &str) -> Result<(Option<String>, HeaderMap), Failure> {
    let mut target = None;
    let mut headers = HeaderMap::new();
    for (n, line) in head.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        let request_line =
            n == 0 && parts.len() == 3 && parts[2].starts_with("HTTP/") && !parts[0].ends_with(':');
        if request_line {
            target = Some(parts[1].to_owned());
            continue;
        }
        let (name, value) = line.split_once(':').ok_or_else(|| {
            Failure::usage(format!(
                "line {} of the headers is not `Name: value`",
                n + 1
            ))
        })?;
        let name = HeaderName::try_from(name.trim()).map_err(|_| {
            Failure::usage(format!(
                "line {}: {:?} is not a header name",
                n + 1,
                name.trim()
            ))
        })?;
        let value = HeaderValue::try_from(value.trim()).map_err(|_| {
            Failure::usage(format!("line {}: the {name} value is not valid", n + 1))
        })?;
        headers.append(name, value);
    }
    Ok((target, headers))
}

/// Reads a raw HTTP/1.1 request file.
pub(crate) fn from_request_file(path: &Path) -> Result<Captured, Failure> {
    let raw = read(path, "the request file")?;
    let split = find(&raw, b"\r\n\r\n")
        .map(|at| (at, at + 4))
        .or_else(|| find(&raw, b"\n\n").map(|at| (at, at + 2)));
    let (head_end, body_start) = split.ok_or_else(|| {
        Failure::usage("the request file has no blank line between the headers and the body")
    })?;
    let head = String::from_utf8_lossy(&raw[..head_end]);
    let (target, headers) = parse_head(&head)?;
    Ok(cut(target, headers, raw[body_start..].to_vec()))
}

/// Reads a headers file and a body file.
pub(crate) fn from_parts(headers: &Path, body: &Path) -> Result<Captured, Failure> {
    let head = read(headers, "--headers")?;
    let (target, headers) = parse_head(&String::from_utf8_lossy(&head))?;
    Ok(cut(target, headers, read(body, "--body")?))
}

/// Cuts the body at `Content-Length`, as a server reads it.
fn cut(target: Option<String>, headers: HeaderMap, mut body: Vec<u8>) -> Captured {
    let length = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    let mut trailing = 0;
    if let Some(length) = length.filter(|&l| l < body.len()) {
        trailing = body.len() - length;
        body.truncate(length);
    }
    Captured {
        target,
        headers,
        body,
        trailing,
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_parse() {
        let (target, headers) =
            parse_head("POST /sms?a=1 HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nX-A: 2\r\n").unwrap();
        assert_eq!(target.as_deref(), Some("/sms?a=1"));
        assert_eq!(headers.get_all("x-a").iter().count(), 2);
        let (target, _) = parse_head("Host: x\n").unwrap();
        assert!(target.is_none());
        assert!(parse_head("no colon here\n").is_err());
    }

    #[test]
    fn bodies_are_cut_at_content_length() {
        let (target, headers) = parse_head("content-length: 2").unwrap();
        let captured = cut(target, headers, b"{}\n".to_vec());
        assert_eq!(
            (captured.body.as_slice(), captured.trailing),
            (&b"{}"[..], 1)
        );
    }
}
