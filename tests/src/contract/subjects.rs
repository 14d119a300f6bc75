//! The subjects port contract: a subscription receives messages published after `subscribe` returns on its exact
//! subject, on one token for `*` and on one or more trailing tokens for `>`, with subject and payload intact, and
//! nothing from subjects that do not match; every subscriber of a subject gets its own copy.

use std::sync::Arc;
use std::time::Duration;

use flowhost_core::ports::{SubjectMessage, SubjectStream, Subjects};
use futures::StreamExt;

use crate::unique;

/// How long a check waits for a message that should arrive.
const ARRIVAL: Duration = Duration::from_secs(5);
/// How long a check waits to be sure nothing more arrives.
const QUIET: Duration = Duration::from_millis(300);

/// A fresh dot-free root token, so checks running in parallel never see each other's messages.
fn root() -> String {
    unique("subj")
}

async fn next(stream: &mut SubjectStream) -> SubjectMessage {
    tokio::time::timeout(ARRIVAL, stream.next())
        .await
        .expect("a matching message arrives")
        .expect("the subscription stays open")
}

async fn assert_quiet(stream: &mut SubjectStream, pattern: &str) {
    if let Ok(Some(extra)) = tokio::time::timeout(QUIET, stream.next()).await {
        panic!("{pattern} received a message it does not match: {extra:?}");
    }
}

/// Publishes `(subject, payload)` pairs in order.
async fn publish_all(subjects: &Arc<dyn Subjects>, messages: &[(String, &str)]) {
    for (subject, payload) in messages {
        subjects.publish(subject, payload.as_bytes().to_vec()).await.expect("publish");
    }
}

/// A plain subject receives only its own messages, subject and bytes intact, in publish order.
pub async fn exact_subject(subjects: Arc<dyn Subjects>) {
    let root = root();
    let pattern = format!("{root}.orders.created");
    let mut stream = subjects.subscribe(&pattern).await.expect("subscribe");
    publish_all(
        &subjects,
        &[
            (format!("{root}.orders.updated"), "no: other last token"),
            (format!("{root}.orders"), "no: shorter"),
            (format!("{root}.orders.created.eu"), "no: longer"),
            (pattern.clone(), "first"),
        ],
    )
    .await;
    subjects.publish(&pattern, vec![0, 159, 255, 10]).await.expect("publish bytes");

    assert_eq!(next(&mut stream).await, SubjectMessage { subject: pattern.clone(), payload: b"first".to_vec() });
    assert_eq!(next(&mut stream).await, SubjectMessage { subject: pattern.clone(), payload: vec![0, 159, 255, 10] });
    assert_quiet(&mut stream, &pattern).await;
}

/// `*` matches exactly one token, anywhere in the pattern.
pub async fn star_wildcard(subjects: Arc<dyn Subjects>) {
    let root = root();
    let pattern = format!("{root}.*.status");
    let mut stream = subjects.subscribe(&pattern).await.expect("subscribe");
    publish_all(
        &subjects,
        &[
            (format!("{root}.status"), "no: zero tokens for *"),
            (format!("{root}.a.b.status"), "no: two tokens for *"),
            (format!("{root}.a.state"), "no: last token differs"),
            (format!("{root}.a.status"), "yes-a"),
            (format!("{root}.b.status.more"), "no: longer"),
            (format!("{root}.b.status"), "yes-b"),
        ],
    )
    .await;
    let first = next(&mut stream).await;
    let second = next(&mut stream).await;
    assert_eq!((first.subject, first.payload), (format!("{root}.a.status"), b"yes-a".to_vec()));
    assert_eq!((second.subject, second.payload), (format!("{root}.b.status"), b"yes-b".to_vec()));
    assert_quiet(&mut stream, &pattern).await;
}

/// `>` matches one or more trailing tokens, never zero.
pub async fn tail_wildcard(subjects: Arc<dyn Subjects>) {
    let root = root();
    let pattern = format!("{root}.events.>");
    let mut stream = subjects.subscribe(&pattern).await.expect("subscribe");
    publish_all(
        &subjects,
        &[
            (format!("{root}.events"), "no: > needs a token"),
            (format!("{root}.other.x"), "no: other branch"),
            (format!("{root}.events.x"), "one"),
            (format!("{root}.events.x.y.z"), "three"),
        ],
    )
    .await;
    let first = next(&mut stream).await;
    let second = next(&mut stream).await;
    assert_eq!((first.subject, first.payload), (format!("{root}.events.x"), b"one".to_vec()));
    assert_eq!((second.subject, second.payload), (format!("{root}.events.x.y.z"), b"three".to_vec()));
    assert_quiet(&mut stream, &pattern).await;
}

/// Every subscription whose pattern matches gets its own copy (broadcast, not a work queue); a dropped
/// subscription stops receiving without disturbing the others.
pub async fn every_subscriber_receives(subjects: Arc<dyn Subjects>) {
    let root = root();
    let subject = format!("{root}.signal");
    let mut exact = subjects.subscribe(&subject).await.expect("subscribe exact");
    let mut wildcard = subjects.subscribe(&format!("{root}.>")).await.expect("subscribe wildcard");
    let dropped = subjects.subscribe(&subject).await.expect("subscribe then drop");
    drop(dropped);

    subjects.publish(&subject, b"ping".to_vec()).await.expect("publish");
    assert_eq!(next(&mut exact).await.payload, b"ping");
    assert_eq!(next(&mut wildcard).await.payload, b"ping");
    assert_quiet(&mut exact, &subject).await;
}
