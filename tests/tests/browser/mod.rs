//! What the browser tests share: Chromium through chromedriver, the
//! console mounted on axum and on actix-web, and waits on the page.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test file uses a different part"
)]

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use webhooks_core::console::Access;
use webhooks_core::inbox::Inbox;

pub const MOUNT: &str = "/ops/webhooks";

pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

pub fn chromedriver() -> Option<String> {
    let path = std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into());
    if std::path::Path::new(&path).exists() {
        return Some(path);
    }
    assert!(
        !ci(),
        "CI=true but {path} is missing: .ci/run installs chromium and chromium-driver"
    );
    eprintln!(
        "skipping the console browser test: no {path} (apt-get install chromium chromium-driver)"
    );
    None
}

/// Who the test's `authorize` says a request is: a `role=reader` cookie
/// makes it read-only, anything else an admin.
pub fn role(cookie: Option<&str>) -> Access {
    if cookie.is_some_and(|c| c.contains("role=reader")) {
        Access::ReadOnly("reader".into())
    } else {
        Access::Admin("ada@ops".into())
    }
}

pub struct Driver {
    child: Child,
    pub port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub async fn start_driver(path: &str) -> Driver {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(path)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "chromedriver did not listen");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Driver { child, port }
}

pub async fn browser(driver: &Driver) -> Client {
    let mut caps = serde_json::Map::new();
    let binary = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": binary,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1240", "--force-device-scale-factor=1"],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a WebDriver session")
}

pub async fn wait_until<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(15);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn start_axum(inbox: Arc<dyn Inbox>) -> SocketAddr {
    let console = tower_webhooks::Console::new(inbox)
        .authorize(|request| role(request.headers.get("cookie").and_then(|v| v.to_str().ok())));
    let app = axum::Router::new().nest_service(MOUNT, console);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

pub fn start_actix(inbox: Arc<dyn Inbox>) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            let server = actix_web::HttpServer::new(move || {
                let console =
                    actix_webhooks::Console::new(Arc::clone(&inbox)).authorize(|request| {
                        role(
                            request
                                .headers()
                                .get("cookie")
                                .and_then(|v| v.to_str().ok()),
                        )
                    });
                actix_web::App::new().service(actix_webhooks::console(MOUNT, console))
            })
            .workers(1)
            .bind("127.0.0.1:0")
            .unwrap();
            tx.send(server.addrs()[0]).unwrap();
            let _ = server.run().await;
        });
    });
    rx.recv().unwrap()
}

/// The number of dead-letter rows once the page shows `expected` (pages
/// load after a click asynchronously), or what it shows after 10 s.
pub async fn rows(client: &Client, expected: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = client
            .find_all(Locator::Css("tr.dead-letter"))
            .await
            .map_or(usize::MAX, |r| r.len());
        if n == expected || Instant::now() > deadline {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The text of the first element matching `css`, waiting for it to appear.
pub async fn text(client: &Client, css: &str) -> String {
    client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css(css))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Waits until the page's text contains `needle`, and returns the text.
pub async fn page_with(client: &Client, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let body = match client.find(Locator::Css("body")).await {
            Ok(body) => body.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if body.contains(needle) || Instant::now() > deadline {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Clicks the first element matching `locator`.
pub async fn click(client: &Client, locator: Locator<'_>) {
    client.find(locator).await.unwrap().click().await.unwrap();
}
