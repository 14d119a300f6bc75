//! What a socket does with the unread rest of a body it refused (too large, a bad query or header checked first).
//!
//! Left unread, that rest is in the server's receive buffer when the connection closes, and the kernel answers a
//! close over unread data with a reset: a client still writing its body (most do not read before they have written)
//! sees a broken pipe instead of the refusal. So a refusal (4xx) of a request that carries a body first reads and
//! discards what is left of it, up to [`LINGER_BYTES`] and [`LINGER_TIME`] (as a web server's "lingering close"
//! does), then answers with `Connection: close`, so the client does not send its next request on that connection.
//! A body past either bound is left unread, as before: the bounds keep a refusal from costing more than a body
//! the route accepts.
//!
//! A request that asked `Expect: 100-continue` is not drained: its client waits for the answer before it sends
//! the body, and reading the body would invite it to send one the route refused.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::http::header::{CONNECTION, CONTENT_LENGTH, EXPECT, TRANSFER_ENCODING};
use axum::http::HeaderValue;
use axum::response::Response;
use tokio::sync::oneshot;

/// The most of a refused body read and discarded before the refusal is sent.
const LINGER_BYTES: u64 = 8 * 1024 * 1024;
/// The longest a refusal waits for the rest of its body.
const LINGER_TIME: Duration = Duration::from_secs(2);

/// The middleware (on every socket): see the module's documentation.
pub(crate) async fn close_after_refused_body(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let headers = request.headers();
    let has_body = headers.contains_key(TRANSFER_ENCODING)
        || headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).is_some_and(|v| v.trim() != "0");
    if !has_body {
        return next.run(request).await;
    }
    let drainable = !headers.contains_key(EXPECT);
    let (back, mut unread) = oneshot::channel();
    let request = request.map(|body| Body::new(Returned { body: Some(body), back: Some(back) }));
    let mut response = next.run(request).await;
    if response.status().is_client_error() {
        if drainable {
            // The handler has returned, so it dropped the body (or kept it in a task of its own: left alone).
            if let Ok(rest) = unread.try_recv() {
                drain(rest).await;
            }
        }
        response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Reads and discards `rest` within the bounds; gives up (leaving the rest unread) past either.
async fn drain(mut rest: Body) {
    if rest.size_hint().lower() > LINGER_BYTES {
        return;
    }
    let discard = async {
        let mut read = 0u64;
        while let Some(Ok(frame)) = std::future::poll_fn(|cx| Pin::new(&mut rest).poll_frame(cx)).await {
            read += frame.data_ref().map_or(0, |data| data.len() as u64);
            if read > LINGER_BYTES {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, discard).await;
}

/// A request's body that, dropped before its end, hands itself back to the middleware instead of closing the
/// connection's reading side.
struct Returned {
    body: Option<Body>,
    back: Option<oneshot::Sender<Body>>,
}

impl HttpBody for Returned {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        match self.body.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.as_ref().map(HttpBody::size_hint).unwrap_or_default()
    }
}

impl Drop for Returned {
    fn drop(&mut self) {
        if let (Some(body), Some(back)) = (self.body.take(), self.back.take()) {
            if !body.is_end_stream() {
                let _ = back.send(body);
            }
        }
    }
}
