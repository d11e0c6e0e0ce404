//! A deliberately small HTTP/1.1 client over a raw socket, so scenarios
//! control exactly what goes on the wire (chunked bodies, lying lengths,
//! dropped connections) and both frameworks are driven identically.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How the body is framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length` with the true length.
    Length,
    /// `Transfer-Encoding: chunked`, in chunks of this many bytes.
    Chunked(usize),
}

/// A request to send.
#[derive(Debug, Clone)]
pub struct Request {
    /// The method (`POST` unless made with [`Request::method`]).
    pub method: &'static str,
    /// The path.
    pub path: String,
    /// Header lines (name, value).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// The framing.
    pub framing: Framing,
}

impl Request {
    /// A POST to `path` with `body`, framed by `Content-Length`.
    pub fn post(path: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            method: "POST",
            path: path.to_owned(),
            headers: Vec::new(),
            body: body.into(),
            framing: Framing::Length,
        }
    }

    /// A `method` request to `path` with no body.
    pub fn method(method: &'static str, path: &str) -> Self {
        Self {
            method,
            ..Self::post(path, Vec::new())
        }
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_owned(), value.into()));
        self
    }

    /// Adds every header of a map.
    #[must_use]
    pub fn headers(mut self, map: &http::HeaderMap) -> Self {
        for (name, value) in map {
            self.headers.push((
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            ));
        }
        self
    }

    /// Sets the framing.
    #[must_use]
    pub fn framing(mut self, framing: Framing) -> Self {
        self.framing = framing;
        self
    }

    fn encode(&self, addr: SocketAddr) -> Vec<u8> {
        let mut out = format!(
            "{} {} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n",
            self.method, self.path
        );
        for (name, value) in &self.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        let mut out = out.into_bytes();
        match self.framing {
            Framing::Length => {
                if !self
                    .headers
                    .iter()
                    .any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                {
                    out.extend_from_slice(
                        format!("content-length: {}\r\n", self.body.len()).as_bytes(),
                    );
                }
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(&self.body);
            }
            Framing::Chunked(size) => {
                out.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
                for chunk in self.body.chunks(size.max(1)) {
                    out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                    out.extend_from_slice(chunk);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n\r\n");
            }
        }
        out
    }
}

/// A response as received.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header lines, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The decoded body.
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of a header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends `request` and reads the whole response (the server closes).
///
/// # Errors
///
/// An I/O error, a timeout (30 s) or an unparsable response, as text.
pub async fn send(addr: SocketAddr, request: &Request) -> Result<Response, String> {
    tokio::time::timeout(Duration::from_secs(30), exchange(addr, request))
        .await
        .map_err(|_| "timed out".to_owned())?
}

/// Sends `request`, then closes the connection after `after` without reading
/// the answer: a client that went away mid-handler.
pub async fn send_and_drop(addr: SocketAddr, request: &Request, after: Duration) {
    if let Ok(mut stream) = TcpStream::connect(addr).await {
        let _ = stream.write_all(&request.encode(addr)).await;
        tokio::time::sleep(after).await;
        drop(stream);
    }
}

/// Sends `request`'s head at once, then its body `chunk` bytes at a time,
/// one chunk every `every` (a trickled upload), reading the answer meanwhile.
///
/// # Errors
///
/// As [`send`].
pub async fn send_trickled(
    addr: SocketAddr,
    request: &Request,
    chunk: usize,
    every: Duration,
) -> Result<Response, String> {
    let wire = request.encode(addr);
    let head_len = wire
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(wire.len(), |i| i + 4);
    let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let (mut reader, mut writer) = stream.into_split();
    let (head, body) = wire.split_at(head_len);
    let (head, body) = (head.to_vec(), body.to_vec());
    let trickle = tokio::spawn(async move {
        let _ = writer.write_all(&head).await;
        for piece in body.chunks(chunk.max(1)) {
            tokio::time::sleep(every).await;
            if writer.write_all(piece).await.is_err() {
                return;
            }
        }
        // Keep the connection open until the answer has been read.
        tokio::time::sleep(Duration::from_secs(60)).await;
    });
    let read = async {
        let mut raw = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => raw.extend_from_slice(&buf[..n]),
                Err(e) if raw.is_empty() => return Err(e.to_string()),
                Err(_) => break,
            }
            if let Some(response) = parse(&raw, false)? {
                return Ok(response);
            }
        }
        parse(&raw, true)?.ok_or_else(|| format!("incomplete response ({} bytes)", raw.len()))
    };
    let result = tokio::time::timeout(Duration::from_secs(30), read).await;
    trickle.abort();
    result.map_err(|_| "timed out".to_owned())?
}

async fn exchange(addr: SocketAddr, request: &Request) -> Result<Response, String> {
    let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    // The server may answer (413) before it has read everything: ignore a
    // failed write and read the answer anyway.
    let _ = stream.write_all(&request.encode(addr)).await;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if raw.is_empty() => return Err(e.to_string()),
            Err(_) => break,
        }
        if let Some(response) = parse(&raw, false)? {
            return Ok(response);
        }
    }
    parse(&raw, true)?.ok_or_else(|| format!("incomplete response ({} bytes)", raw.len()))
}

/// Parses a complete response, or `None` if more bytes are needed.
fn parse(raw: &[u8], eof: bool) -> Result<Option<Response>, String> {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&raw[..end]).map_err(|e| e.to_string())?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let rest = &raw[end + 4..];
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let body = if let Some(len) = find("content-length") {
        let len: usize = len.parse().map_err(|_| "bad content-length".to_owned())?;
        if rest.len() < len {
            return Ok(None);
        }
        rest[..len].to_vec()
    } else if find("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        match dechunk(rest) {
            Some(body) => body,
            None => return Ok(None),
        }
    } else if eof {
        // No framing: the body runs to the end of the connection.
        rest.to_vec()
    } else {
        return Ok(None);
    };
    Ok(Some(Response {
        status,
        headers,
        body,
    }))
}

fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&rest[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Some(body);
        }
        if rest.len() < size + 2 {
            return None;
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}
