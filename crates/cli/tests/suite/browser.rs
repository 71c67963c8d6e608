//! A real browser for the end-to-end tests: Debian's headless Chromium, driven through
//! Debian's chromedriver (WebDriver over loopback HTTP) with `fantoccini`.
//!
//! Each [`Browser`] has its own chromedriver on a free port, its own profile folder
//! and its own `HOME` (so Chromium's crash-report database lands there too); every
//! process it starts carries that folder's name on its command line, which is how the
//! teardown finds and ends any the driver left behind: Chromium outlives a killed
//! chromedriver, so a test must never rely on the driver alone.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

use super::harness::{free_port, host_processes_with, require_tools, unique, wait_until};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Chromium's flags that work on machines without a display, a GPU or a network, and
/// as root: no sandbox of its own (the test's page is the only one it loads), nothing
/// fetched in the background (component updates, sync, QUIC probes).
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
];

/// How long one WebDriver command may take before the test gives up on the browser.
const COMMAND_DEADLINE: Duration = Duration::from_secs(30);

/// Whether Chromium and chromedriver are installed (see [`require_tools`]).
#[must_use]
pub fn require_browser() -> bool {
    require_tools(&[(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")])
}

/// The downloads folder of a browser whose folder is `dir`.
fn dir_downloads(dir: &Path) -> String {
    dir.join("downloads").display().to_string()
}

/// Where the tests' screenshots go: `target/dashboard-screenshots/`.
pub fn screenshot_dir() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp).join("dashboard-screenshots")
}

/// A headless Chromium session; the browser and its driver end on drop.
pub struct Browser {
    rt: tokio::runtime::Runtime,
    client: Option<Client>,
    driver: Child,
    /// The profile, `HOME` and driver log folder; its name marks every process.
    dir: PathBuf,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a browser session.
    pub fn start() -> Self {
        let dir = PathBuf::from(format!("/tmp/vg-e2e-browser-{}", unique()));
        let profile = dir.join("profile");
        std::fs::create_dir_all(&profile).unwrap();
        let log = std::fs::File::create(dir.join("chromedriver.log")).unwrap();
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg(format!(
                "--log-path={}",
                dir.join("chromedriver.log").display()
            ))
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("HOME", &dir)
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env("XDG_CACHE_HOME", dir.join("cache"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {CHROMEDRIVER}: {e}"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut browser = Self {
            rt,
            client: None,
            driver,
            dir,
        };
        let listening = wait_until(Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(
            listening,
            "chromedriver never listened on port {port}: {}",
            browser.driver_log()
        );
        let mut args: Vec<String> = FLAGS.iter().map(|f| (*f).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": args,
                // Downloads land in this browser's own folder, without a question.
                "prefs": {
                    "download.default_directory": dir_downloads(&browser.dir),
                    "download.prompt_for_download": false,
                },
            },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("a JSON object literal")
        };
        let url = format!("http://127.0.0.1:{port}");
        let client = browser.block(
            ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities)
                .connect(&url),
        );
        match client {
            Ok(client) => browser.client = Some(client),
            Err(e) => panic!(
                "cannot open a Chromium session through chromedriver: {e}\n{}",
                browser.driver_log()
            ),
        }
        browser
    }

    /// Where this browser saves downloads.
    pub fn downloads(&self) -> PathBuf {
        PathBuf::from(dir_downloads(&self.dir))
    }

    fn block<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(async {
            tokio::time::timeout(COMMAND_DEADLINE, f)
                .await
                .unwrap_or_else(|_| panic!("a WebDriver command took over {COMMAND_DEADLINE:?}"))
        })
    }

    fn client(&self) -> &Client {
        self.client
            .as_ref()
            .expect("the session is open until drop")
    }

    fn driver_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("chromedriver.log"))
            .map(|log| {
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            })
            .unwrap_or_default()
    }

    /// The folder whose name every process of this browser carries.
    pub fn marker(&self) -> String {
        self.dir.display().to_string()
    }

    /// Loads `url` and waits for the page's load event.
    pub fn goto(&self, url: &str) {
        self.block(self.client().goto(url))
            .unwrap_or_else(|e| panic!("cannot load {url}: {e}"));
    }

    /// The address of the page shown now.
    pub fn current_url(&self) -> String {
        self.block(self.client().current_url())
            .map(|u| u.to_string())
            .unwrap_or_else(|e| panic!("cannot read the current URL: {e}"))
    }

    /// Runs `script` (a function body; `arguments[i]` are `args`) in the page.
    pub fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.block(self.client().execute(script, args))
            .unwrap_or_else(|e| panic!("script failed in the page: {e}\n{script}"))
    }

    /// How many elements match `css` now.
    pub fn count(&self, css: &str) -> usize {
        let n = self.js(
            "return document.querySelectorAll(arguments[0]).length;",
            vec![json!(css)],
        );
        n.as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0)
    }

    /// The text of the first element matching `css` (`textContent`, trimmed), if any.
    pub fn text(&self, css: &str) -> Option<String> {
        let text = self.js(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
            vec![json!(css)],
        );
        text.as_str().map(|t| t.trim().to_owned())
    }

    /// The texts of every element matching `css`.
    pub fn texts(&self, css: &str) -> Vec<String> {
        let texts = self.js(
            "return Array.from(document.querySelectorAll(arguments[0]), e => e.textContent);",
            vec![json!(css)],
        );
        texts
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(|t| t.trim().to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The visible text of the whole page, for failure messages.
    pub fn page_text(&self) -> String {
        self.text("body").unwrap_or_default()
    }

    /// Clicks the first element matching `css`, as a user would (WebDriver's element
    /// click: scrolled into view, refused when something covers it). A live page may
    /// redraw the element between finding and clicking it: then it is found again,
    /// for a few seconds.
    pub fn click(&self, css: &str) {
        let client = self.client();
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            let clicked = self.block(async {
                let element = client.find(Locator::Css(css)).await?;
                element.click().await
            });
            match clicked {
                Ok(()) => return,
                Err(e) if e.to_string().contains("stale element") && Instant::now() < end => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("cannot click {css}: {e}\npage: {}", self.page_text()),
            }
        }
    }

    /// Accepts a `confirm()` or `alert()` the page opened, if it opened one.
    pub fn accept_alert_if_any(&self) {
        let _ = self.block(self.client().accept_alert());
    }

    /// Whether some element matching `css` is offered to the user: shown and enabled.
    pub fn offered(&self, css: &str) -> bool {
        self.js(
            "return Array.from(document.querySelectorAll(arguments[0]))
               .some(e => !e.disabled && e.getClientRects().length > 0);",
            vec![json!(css)],
        ) == json!(true)
    }

    /// Replaces the text of the input matching `css` by `text`, key by key as a user
    /// would (Backspaces first: WebDriver's own clear fires no `input` event).
    pub fn type_into(&self, css: &str, text: &str) {
        let client = self.client();
        self.block(async {
            let element = client.find(Locator::Css(css)).await?;
            let old = element.prop("value").await?.unwrap_or_default();
            let mut keys: String = old.chars().map(|_| '\u{E003}').collect();
            keys.push_str(text);
            element.send_keys(&keys).await
        })
        .unwrap_or_else(|e| panic!("cannot type into {css}: {e}"));
    }

    /// Waits until `condition` holds, at most `deadline`; otherwise fails the test
    /// saying what was awaited, with the page's text and a screenshot of it.
    #[track_caller]
    pub fn wait(&self, what: &str, deadline: Duration, mut condition: impl FnMut(&Self) -> bool) {
        let end = Instant::now() + deadline;
        loop {
            if condition(self) {
                return;
            }
            if Instant::now() > end {
                let shot = screenshot_dir().join(format!("failed-{}.png", unique()));
                self.screenshot(&shot);
                panic!(
                    "waited {deadline:?} for {what}, in vain; page {} (screenshot {}):\n{}",
                    self.current_url(),
                    shot.display(),
                    self.page_text()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until an element matches `css`.
    #[track_caller]
    pub fn wait_for(&self, css: &str, deadline: Duration) {
        self.wait(&format!("an element matching {css}"), deadline, |b| {
            b.count(css) > 0
        });
    }

    /// Saves a PNG of the viewport at `path` (creating its folder).
    pub fn screenshot(&self, path: &Path) {
        let png = self
            .block(self.client().screenshot())
            .unwrap_or_else(|e| panic!("cannot take a screenshot: {e}"));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ends the WebDriver session, which closes Chromium; bounded, since a browser
        // that hangs must not hang the test too.
        if let Some(client) = self.client.take() {
            let _ = self.rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(10), client.close()).await
            });
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        // Anything of this browser still running (a Chromium that outlived its
        // driver): ended by pid, found by the profile folder on its command line.
        let marker = self.marker();
        let gone = wait_until(Duration::from_secs(5), || {
            host_processes_with(&marker).is_empty()
        });
        if !gone {
            for (pid, _) in host_processes_with(&marker) {
                let _ = Command::new("/bin/kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Serves `page` as `text/html` to every request on a loopback port, in a thread.
fn serve_page(page: &'static str) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut request = [0u8; 4096];
            let _ = conn.read(&mut request);
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    port
}

/// The harness itself, against a page of its own: it loads, clicks, sees an element
/// that the page adds later, takes a screenshot and leaves no browser process behind.
#[test]
fn the_browser_loads_a_page_sees_a_late_element_and_leaves_nothing_running() {
    if !require_browser() {
        return;
    }
    let page = r#"<!doctype html><title>harness</title>
<button id="go" onclick="setTimeout(() => { const p = document.createElement('p'); p.id = 'late'; p.textContent = 'arrived ' + location.search; document.body.append(p); }, 300)">go</button>"#;
    let port = serve_page(page);
    let browser = Browser::start();
    let marker = browser.marker();
    assert!(
        !host_processes_with(&marker).is_empty(),
        "no process carries the browser's marker {marker}: the teardown could not find them"
    );
    browser.goto(&format!("http://127.0.0.1:{port}/?x=1"));
    assert_eq!(browser.count("#late"), 0);
    browser.click("#go");
    browser.wait_for("#late", Duration::from_secs(10));
    assert_eq!(browser.text("#late").as_deref(), Some("arrived ?x=1"));
    let shot = screenshot_dir().join(format!("harness-{}.png", unique()));
    browser.screenshot(&shot);
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG: {}", shot.display());
    std::fs::remove_file(&shot).unwrap();
    drop(browser);
    assert!(
        host_processes_with(&marker).is_empty(),
        "browser processes outlived the teardown: {:?}",
        host_processes_with(&marker)
    );
}
