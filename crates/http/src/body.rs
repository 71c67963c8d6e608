//! Bodies as they pass: the request's on its way upstream (counted, scanned for other
//! hosts' placeholders) and the response's on its way to the sandbox (counted, secret
//! values turned back into placeholders). Both stream frame by frame.
//!
//! [`Record`] is one request's [`Exchange`] in the making. Every part of the exchange
//! that is still running holds it (the handler, both bodies, an upgraded tunnel); the
//! last to let go reports it, so each request is reported exactly once, whichever way
//! it ends.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::Sleep;

use crate::event::{EventSink, Exchange, HttpEvent};
use crate::scan::{Detector, Replacer};
use crate::secret::{ConnSecrets, mask_values};
use crate::upstream::{H1Sender, Upstream};

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub(crate) type Events = Arc<EventSink>;

/// How long a response may pause before a short held-back tail is released.
pub(crate) const PAUSE: Duration = Duration::from_millis(20);

pub(crate) struct Record {
    exchange: Mutex<Exchange>,
    started: Instant,
    bytes_out: AtomicU64,
    bytes_in: AtomicU64,
    events: Events,
}

impl Record {
    pub(crate) fn new(exchange: Exchange, events: Events) -> Arc<Self> {
        Arc::new(Self {
            exchange: Mutex::new(exchange),
            started: Instant::now(),
            bytes_out: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            events,
        })
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut Exchange)) {
        f(&mut self.exchange.lock().unwrap_or_else(PoisonError::into_inner));
    }

    pub(crate) fn read<T>(&self, f: impl FnOnce(&Exchange) -> T) -> T {
        f(&self.exchange.lock().unwrap_or_else(PoisonError::into_inner))
    }

    pub(crate) fn add_out(&self, n: usize) {
        self.bytes_out.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn add_in(&self, n: usize) {
        self.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        let exchange = self
            .exchange
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        let mut exchange = std::mem::replace(exchange, empty_exchange());
        exchange.bytes_out = *self.bytes_out.get_mut();
        exchange.bytes_in = *self.bytes_in.get_mut();
        exchange.duration = self.started.elapsed();
        self.events.emit(HttpEvent::Exchange(exchange));
    }
}

fn empty_exchange() -> Exchange {
    Exchange {
        connection: 0,
        time: std::time::SystemTime::UNIX_EPOCH,
        version: "",
        method: String::new(),
        scheme: vg_policy::network::Scheme::Http,
        host: String::new(),
        port: 0,
        path: String::new(),
        status: None,
        bytes_out: 0,
        bytes_in: 0,
        duration: Duration::ZERO,
        decision: "",
        rule: None,
        reason: String::new(),
        secrets: Vec::new(),
        exfiltration: None,
        error: None,
    }
}

/// Why a request body was cut.
#[derive(Debug, thiserror::Error)]
#[error("the request body carries the placeholder of secret {0}, which is not for this host")]
pub(crate) struct Exfiltration(pub(crate) String);

/// The sandbox's request body on its way upstream.
pub(crate) struct RequestBody {
    inner: Incoming,
    detector: Option<Detector>,
    secrets: Arc<ConnSecrets>,
    record: Arc<Record>,
    cut: bool,
}

impl RequestBody {
    pub(crate) fn new(inner: Incoming, secrets: Arc<ConnSecrets>, record: Arc<Record>) -> Self {
        let detector =
            (!secrets.foreign().is_empty()).then(|| Detector::new(Arc::clone(secrets.foreign())));
        Self {
            inner,
            detector,
            secrets,
            record,
            cut: false,
        }
    }

    /// Refuses the rest of the body: the upstream sees it end short.
    fn cut(&mut self, secret: usize) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.cut = true;
        let name = self.secrets.set().name(secret).to_owned();
        self.record.update(|ex| {
            ex.exfiltration = Some(name.clone());
            ex.decision = "deny";
            ex.reason = crate::exchange::EXFILTRATION.to_owned();
        });
        Poll::Ready(Some(Err(Box::new(Exfiltration(name)))))
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if this.cut {
            return Poll::Ready(None);
        }
        let frame = match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            None => return Poll::Ready(None),
            Some(Err(e)) => return Poll::Ready(Some(Err(Box::new(e)))),
            Some(Ok(frame)) => frame,
        };
        if let Some(data) = frame.data_ref() {
            if let Some(detector) = &mut this.detector
                && let Some(secret) = detector.feed(data)
            {
                return this.cut(secret);
            }
            this.record.add_out(data.len());
        } else if let Some(trailers) = frame.trailers_ref()
            && let Some(secret) = this.secrets.find_foreign(trailers, "")
        {
            return this.cut(secret);
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.cut || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The upstream's response body on its way to the sandbox.
pub(crate) struct ResponseBody {
    inner: Incoming,
    replacer: Replacer,
    pause: Option<Pin<Box<Sleep>>>,
    trailers: Option<HeaderMap>,
    ended: bool,
    record: Arc<Record>,
    /// An HTTP/1.1 upstream connection to reuse once this body has been read.
    reuse: Option<(Arc<Upstream>, H1Sender)>,
}

impl ResponseBody {
    pub(crate) fn new(
        inner: Incoming,
        replacer: Replacer,
        record: Arc<Record>,
        reuse: Option<(Arc<Upstream>, H1Sender)>,
    ) -> Self {
        Self {
            inner,
            replacer,
            pause: None,
            trailers: None,
            ended: false,
            record,
            reuse,
        }
    }

    fn data(&self, data: Bytes) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.record.add_in(data.len());
        Poll::Ready(Some(Ok(Frame::data(data))))
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        loop {
            if let Some(trailers) = this.trailers.take() {
                return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
            }
            if this.ended {
                let rest = this.replacer.finish();
                if rest.is_empty() {
                    return Poll::Ready(None);
                }
                return this.data(rest);
            }
            let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => {
                    if !this.replacer.releasable() {
                        return Poll::Pending;
                    }
                    let pause = this
                        .pause
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep(PAUSE)));
                    ready!(pause.as_mut().poll(cx));
                    this.pause = None;
                    match this.replacer.release_after_pause() {
                        Some(rest) => return this.data(rest),
                        None => return Poll::Pending,
                    }
                }
                Poll::Ready(None) => {
                    this.ended = true;
                    continue;
                }
                Poll::Ready(Some(Err(e))) => {
                    let text = format!("the upstream's response body failed: {e}");
                    this.record.update(|ex| {
                        ex.error.get_or_insert(text);
                    });
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
                Poll::Ready(Some(Ok(frame))) => frame,
            };
            this.pause = None;
            match frame.into_data() {
                Ok(data) => {
                    let out = this.replacer.feed(data);
                    if !out.is_empty() {
                        return this.data(out);
                    }
                }
                Err(frame) => {
                    if let Ok(mut trailers) = frame.into_trailers() {
                        mask_values(this.replacer.patterns(), &mut trailers);
                        this.trailers = Some(trailers);
                        let rest = this.replacer.finish();
                        if !rest.is_empty() {
                            return this.data(rest);
                        }
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.trailers.is_none()
            && self.replacer.held() == 0
            && (self.ended || self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        if self.ended {
            return SizeHint::with_exact(self.replacer.held() as u64);
        }
        let inner = self.inner.size_hint();
        let held = self.replacer.held() as u64;
        let mut hint = SizeHint::new();
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(held));
        }
        hint.set_lower(inner.lower().saturating_add(held));
        hint
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        if let Some((upstream, sender)) = self.reuse.take()
            && (self.ended || self.inner.is_end_stream())
        {
            upstream.reuse(sender);
        }
    }
}
