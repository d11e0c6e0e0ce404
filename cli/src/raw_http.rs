//! `send` over plain HTTP without a client library: each request is
//! serialised once, at signing time, to one contiguous buffer (request
//! line, `Host`, the signed headers, `Content-Length`, body) and written
//! with one write on a kept-alive connection; the answer is read by a small
//! HTTP/1.1 response reader (httparse for the head; the body by
//! `Content-Length`, chunked, or to the end of the connection) into one
//! read buffer per connection. A malformed answer is an error, never a
//! panic; the connection is then dropped.

use std::net::SocketAddr;

use http::{HeaderMap, header};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// The largest response head read (status line and headers).
const MAX_HEAD: usize = 64 * 1024;
/// The most response headers parsed.
const MAX_HEADERS: usize = 100;
/// The longest chunk-size line (with extensions) read.
const MAX_CHUNK_LINE: usize = 4096;
/// The bytes of a response body kept when asked for.
const KEEP: usize = 4096;
/// A connection's read buffer to begin with.
const BUFFER: usize = 8 * 1024;

/// `POST path HTTP/1.1` with `host` (unless `headers` has its own), the
/// `headers` (less any `Content-Length` or `Transfer-Encoding`: the body's
/// own length is sent) and `body`, as one buffer.
pub(crate) fn serialize(host: &[u8], path: &[u8], headers: &HeaderMap, body: &[u8]) -> Vec<u8> {
    let size = 64
        + host.len()
        + path.len()
        + headers
            .iter()
            .map(|(n, v)| n.as_str().len() + v.len() + 4)
            .sum::<usize>()
        + body.len();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(b"POST ");
    out.extend_from_slice(path);
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if !headers.contains_key(header::HOST) {
        out.extend_from_slice(b"host: ");
        out.extend_from_slice(host);
        out.extend_from_slice(b"\r\n");
    }
    for (name, value) in headers {
        if name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"content-length: ");
    out.extend_from_slice(body.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body);
    out
}

/// An answer read off the connection.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Response {
    /// The status (the final one: `1xx` interim answers are skipped).
    pub(crate) status: u16,
    /// The body's first [`KEEP`] bytes, when asked for.
    pub(crate) body: Vec<u8>,
    /// The server closes the connection after this answer (`Connection:
    /// close`, HTTP/1.0, a body read to the end of the connection, or bytes
    /// after the answer): another request needs a new one.
    pub(crate) close: bool,
}

/// How the response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// No body (`204`, `304`).
    Empty,
    /// `Content-Length`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// To the end of the connection.
    UntilClose,
}

/// What the reader takes from a response head.
struct Head {
    /// The head's length in the buffer.
    len: usize,
    status: u16,
    framing: Framing,
    close: bool,
}

/// The head in `bytes`: `None` when incomplete.
fn parse_head(bytes: &[u8]) -> Result<Option<Head>, String> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("malformed response: {e}")),
    };
    let status = response
        .code
        .ok_or_else(|| "malformed response: no status".to_owned())?;
    let mut length: Option<u64> = None;
    let mut chunked = None;
    let (mut close, mut keep_alive) = (false, false);
    for h in response.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let value = std::str::from_utf8(h.value)
                .ok()
                .map(str::trim)
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| "malformed response: invalid Content-Length".to_owned())?;
            if length.is_some_and(|l| l != value) {
                return Err("malformed response: conflicting Content-Length".to_owned());
            }
            length = Some(value);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // The last coding applied decides: chunked, or read to the end.
            let last = h.value.rsplit(|&b| b == b',').next().unwrap_or_default();
            chunked = Some(last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    // HTTP/1.0 keeps the connection only when it says so.
    if response.version == Some(0) && !keep_alive {
        close = true;
    }
    let framing = match (status, chunked, length) {
        (100..=199 | 204 | 304, _, _) => Framing::Empty,
        (_, Some(true), _) => Framing::Chunked,
        (_, Some(false), _) | (_, None, None) => Framing::UntilClose,
        (_, None, Some(length)) => Framing::Length(length),
    };
    if framing == Framing::UntilClose {
        close = true;
    }
    Ok(Some(Head {
        len,
        status,
        framing,
        close,
    }))
}

/// One kept-alive connection and its read buffer.
pub(crate) struct Connection<S> {
    io: S,
    buf: Vec<u8>,
    /// The unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
}

impl Connection<TcpStream> {
    /// A connection to the first of `addrs` that answers.
    pub(crate) async fn open(addrs: &[SocketAddr]) -> Result<Self, String> {
        let mut last = None;
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(Self::new(stream));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(match last {
            Some(e) => format!("cannot connect: {e}"),
            None => "cannot connect: the host has no address".to_owned(),
        })
    }

    /// Whether the server closed the connection (or sent what was not
    /// asked for) since the last answer: then a new one is needed, and
    /// nothing was sent on this one, so nothing is sent twice. One read,
    /// which the kernel answers `EAGAIN` on an open connection.
    pub(crate) fn is_closed(&self) -> bool {
        let mut probe = [0_u8; 1];
        !matches!(
            self.io.try_read(&mut probe),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
        )
    }

    /// Writes `request` (one write) and reads the answer.
    pub(crate) async fn exchange(
        &mut self,
        request: &[u8],
        keep_body: bool,
    ) -> Result<Response, String> {
        self.io
            .write_all(request)
            .await
            .map_err(|e| format!("the connection was closed: {e}"))?;
        self.read_response(keep_body).await
    }
}

impl<S: AsyncRead + Unpin> Connection<S> {
    fn new(io: S) -> Self {
        Self {
            io,
            buf: vec![0; BUFFER],
            start: 0,
            end: 0,
        }
    }

    /// Reads more into the buffer: the count read, 0 at the end of the
    /// connection.
    async fn fill(&mut self) -> Result<usize, String> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                (self.start, self.end) = (0, self.end - self.start);
            } else {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        let n = self
            .io
            .read(&mut self.buf[self.end..])
            .await
            .map_err(|e| format!("the connection was closed: {e}"))?;
        self.end += n;
        Ok(n)
    }

    /// Reads more, or fails with `what` at the end of the connection.
    async fn more(&mut self, what: &str) -> Result<(), String> {
        match self.fill().await? {
            0 => Err(format!("the connection was closed {what}")),
            _ => Ok(()),
        }
    }

    /// Reads one answer (after any `1xx` interim ones).
    pub(crate) async fn read_response(&mut self, keep_body: bool) -> Result<Response, String> {
        let head = loop {
            let head = self.read_head().await?;
            match head.status {
                101 => {
                    return Err("malformed response: 101 Switching Protocols to a POST".to_owned());
                }
                100..=199 => {}
                _ => break head,
            }
        };
        let mut body = Vec::new();
        let keep = |body: &mut Vec<u8>, bytes: &[u8]| {
            if keep_body && body.len() < KEEP {
                let room = KEEP - body.len();
                body.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
        };
        let mut close = head.close;
        match head.framing {
            Framing::Empty => {}
            Framing::Length(length) => self.read_body(length, &mut body, &keep).await?,
            Framing::Chunked => loop {
                let size = self.read_chunk_size().await?;
                if size == 0 {
                    self.read_trailers().await?;
                    break;
                }
                self.read_body(size, &mut body, &keep).await?;
                while self.end - self.start < 2 {
                    self.more("mid-answer").await?;
                }
                if self.buf[self.start..self.start + 2] != *b"\r\n" {
                    return Err("malformed response: a chunk does not end with CRLF".to_owned());
                }
                self.start += 2;
            },
            Framing::UntilClose => loop {
                keep(&mut body, &self.buf[self.start..self.end]);
                self.start = self.end;
                if self.fill().await? == 0 {
                    break;
                }
            },
        }
        // Bytes nobody asked for: the connection cannot be trusted further.
        if self.start != self.end {
            close = true;
        }
        Ok(Response {
            status: head.status,
            body,
            close,
        })
    }

    /// Reads a head and moves past it.
    async fn read_head(&mut self) -> Result<Head, String> {
        loop {
            if self.end > self.start {
                if let Some(head) = parse_head(&self.buf[self.start..self.end])? {
                    self.start += head.len;
                    return Ok(head);
                }
                if self.end - self.start >= MAX_HEAD {
                    return Err("malformed response: the head is over 64 KiB".to_owned());
                }
            }
            let answered = self.end > self.start;
            if self.fill().await? == 0 {
                return Err(match answered {
                    true => "the connection was closed mid-answer".to_owned(),
                    false => "the connection was closed before an answer".to_owned(),
                });
            }
        }
    }

    /// Reads `length` body bytes, keeping what `keep` keeps.
    async fn read_body(
        &mut self,
        mut length: u64,
        body: &mut Vec<u8>,
        keep: &impl Fn(&mut Vec<u8>, &[u8]),
    ) -> Result<(), String> {
        loop {
            let available = self.end - self.start;
            let take = usize::try_from(length).map_or(available, |l| l.min(available));
            keep(body, &self.buf[self.start..self.start + take]);
            self.start += take;
            length -= take as u64;
            if length == 0 {
                return Ok(());
            }
            self.more("mid-answer").await?;
        }
    }

    /// Reads a chunk-size line and moves past it.
    async fn read_chunk_size(&mut self) -> Result<u64, String> {
        loop {
            match httparse::parse_chunk_size(&self.buf[self.start..self.end]) {
                Ok(httparse::Status::Complete((len, size))) => {
                    self.start += len;
                    return Ok(size);
                }
                Ok(httparse::Status::Partial) => {}
                Err(_) => return Err("malformed response: invalid chunk size".to_owned()),
            }
            if self.end - self.start > MAX_CHUNK_LINE {
                return Err("malformed response: invalid chunk size".to_owned());
            }
            self.more("mid-answer").await?;
        }
    }

    /// Reads the trailers after the last chunk, up to the empty line.
    async fn read_trailers(&mut self) -> Result<(), String> {
        let mut read = 0;
        loop {
            match self.buf[self.start..self.end]
                .windows(2)
                .position(|w| w == b"\r\n")
            {
                Some(0) => {
                    self.start += 2;
                    return Ok(());
                }
                Some(at) => {
                    read += at + 2;
                    self.start += at + 2;
                    continue;
                }
                None => {}
            }
            if read + (self.end - self.start) > MAX_HEAD {
                return Err("malformed response: the trailers are over 64 KiB".to_owned());
            }
            self.more("mid-answer").await?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// Hands out each answer of `answers` at most `step` bytes at a time,
    /// no read crossing from one answer to the next (as a server answers
    /// one request at a time).
    struct Trickle {
        answers: Vec<Vec<u8>>,
        answer: usize,
        at: usize,
        step: usize,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            let this = &mut *self;
            if this.answer < this.answers.len() && this.at == this.answers[this.answer].len() {
                (this.answer, this.at) = (this.answer + 1, 0);
            }
            if let Some(bytes) = this.answers.get(this.answer) {
                let end = (this.at + this.step)
                    .min(bytes.len())
                    .min(this.at + buf.remaining());
                buf.put_slice(&bytes[this.at..end]);
                this.at = end;
            }
            Poll::Ready(Ok(()))
        }
    }

    /// Every answer read off `answers`, `step` bytes at a time.
    fn read_all(answers: &[&[u8]], step: usize) -> Vec<Result<Response, String>> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut connection = Connection::new(Trickle {
                answers: answers.iter().map(|a| a.to_vec()).collect(),
                answer: 0,
                at: 0,
                step,
            });
            let mut read = Vec::new();
            loop {
                let answer = connection.read_response(true).await;
                let stop = !matches!(&answer, Ok(r) if !r.close);
                read.push(answer);
                if stop {
                    return read;
                }
            }
        })
    }

    fn ok(status: u16, body: &str, close: bool) -> Result<Response, String> {
        Ok(Response {
            status,
            body: body.as_bytes().to_vec(),
            close,
        })
    }

    /// Each step size, from a byte at a time to all at once.
    fn each_step(answers: &[&[u8]], expected: &[Result<Response, String>]) {
        for step in [1, 2, 3, 7, 64, 100_000] {
            assert_eq!(read_all(answers, step), expected, "{step} bytes at a time");
        }
    }

    #[test]
    fn content_length_bodies_on_a_kept_connection() {
        each_step(
            &[
                b"HTTP/1.1 204 No Content\r\ndate: now\r\n\r\n",
                b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 9\r\n\r\nsignature",
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            ],
            &[
                ok(204, "", false),
                ok(401, "signature", false),
                ok(200, "", false),
                Err("the connection was closed before an answer".to_owned()),
            ],
        );
    }

    #[test]
    fn chunked_bodies_with_extensions_and_trailers() {
        each_step(
            &[
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                  5\r\nhello\r\n1;ext=1\r\n \r\nA\r\n0123456789\r\n0\r\n\r\n",
                b"HTTP/1.1 400 Bad Request\r\ntransfer-encoding: gzip, chunked\r\n\r\n\
                  3\r\nbad\r\n0\r\nx-trailer: yes\r\n\r\n",
            ],
            &[
                ok(200, "hello 0123456789", false),
                ok(400, "bad", false),
                Err("the connection was closed before an answer".to_owned()),
            ],
        );
    }

    #[test]
    fn connection_close_http_1_0_and_bodies_to_the_end() {
        each_step(
            &[b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"],
            &[ok(204, "", true)],
        );
        each_step(
            &[b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok"],
            &[ok(200, "ok", true)],
        );
        each_step(
            &[b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\ncontent-length: 2\r\n\r\nok"],
            &[
                ok(200, "ok", false),
                Err("the connection was closed before an answer".to_owned()),
            ],
        );
        each_step(
            &[b"HTTP/1.1 200 OK\r\n\r\nto the end"],
            &[ok(200, "to the end", true)],
        );
        // Bytes after the answer, read with it: it stands, the connection
        // does not.
        assert_eq!(
            read_all(&[b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 204"], 100_000),
            [ok(204, "", true)]
        );
    }

    #[test]
    fn interim_answers_are_skipped() {
        each_step(
            &[
                b"HTTP/1.1 100 Continue\r\n\r\n",
                b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
            ],
            &[
                ok(202, "", false),
                Err("the connection was closed before an answer".to_owned()),
            ],
        );
    }

    #[test]
    fn malformed_answers_are_errors() {
        let malformed = |bytes: &[u8], reason: &str| {
            for answer in read_all(&[bytes], 1)
                .into_iter()
                .chain(read_all(&[bytes], 100_000))
            {
                let error = answer.expect_err(reason);
                assert!(error.contains(reason), "{error:?} for {reason:?}");
            }
        };
        malformed(b"garbage\r\n\r\n", "malformed response");
        malformed(b"HTTP/1.1 2000 OK\r\n\r\n", "malformed response");
        malformed(
            b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n",
            "invalid Content-Length",
        );
        malformed(
            b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab",
            "conflicting Content-Length",
        );
        malformed(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            "invalid chunk size",
        );
        malformed(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
            "does not end with CRLF",
        );
        malformed(
            b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort",
            "closed mid-answer",
        );
        malformed(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhel",
            "closed mid-answer",
        );
        malformed(b"HTTP/1.1 200 O", "closed mid-answer");
        malformed(
            b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
            "101 Switching Protocols",
        );
        let mut huge = b"HTTP/1.1 200 OK\r\nx: ".to_vec();
        huge.resize(MAX_HEAD + 10, b'a');
        malformed(&huge, "over 64 KiB");
    }

    #[test]
    fn only_the_first_bytes_of_a_body_are_kept() {
        let mut bytes =
            format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", KEEP * 3).into_bytes();
        bytes.resize(bytes.len() + KEEP * 3, b'x');
        let answers = read_all(&[&bytes], 100_000);
        let Ok(answer) = &answers[0] else {
            panic!("{answers:?}")
        };
        assert_eq!(answer.body.len(), KEEP);
    }

    #[test]
    fn a_request_is_one_buffer() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
        headers.insert(header::CONTENT_LENGTH, "999".parse().unwrap());
        headers.insert("stripe-signature", "t=1,v1=ab".parse().unwrap());
        let bytes = serialize(b"localhost:3000", b"/hooks?x=1", &headers, b"{}");
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "POST /hooks?x=1 HTTP/1.1\r\nhost: localhost:3000\r\n\
             content-type: application/json\r\nstripe-signature: t=1,v1=ab\r\n\
             content-length: 2\r\n\r\n{}"
        );
        headers.insert(header::HOST, "public.example.com".parse().unwrap());
        let bytes = serialize(b"localhost:3000", b"/", &headers, b"");
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.starts_with("POST / HTTP/1.1\r\nhost: public.example.com\r\n")
                || text.contains("\r\nhost: public.example.com\r\n"),
            "{text}"
        );
        assert_eq!(text.matches("host:").count(), 1, "{text}");
    }
}
