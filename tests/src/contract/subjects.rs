//! The subjects port contract: a subscription receives messages published after `subscribe` returns on its exact
//! subject, on one token for `*` and on one or more trailing tokens for `>`, with subject and payload intact, and
//! nothing from subjects that do not match; every subscriber of a subject gets its own copy, except members of
//! one queue group, which share one; a request gets the first reply, or a timeout or "no responders" error.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use flowhost_core::ports::{PortError, SubjectMessage, SubjectStream, Subjects};
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

    assert_eq!(next(&mut stream).await, SubjectMessage::new(pattern.clone(), b"first".to_vec()));
    assert_eq!(next(&mut stream).await, SubjectMessage::new(pattern.clone(), vec![0, 159, 255, 10]));
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

/// A request reaches a subscriber with a reply address; what the subscriber `respond`s there is the answer.
pub async fn request_reply_round_trip(subjects: Arc<dyn Subjects>) {
    let subject = format!("{}.rpc", root());
    let mut service = subjects.subscribe(&subject).await.expect("subscribe");
    let responder = {
        let subjects = Arc::clone(&subjects);
        tokio::spawn(async move {
            let request = next(&mut service).await;
            let reply = request.reply.clone().expect("a request carries a reply subject");
            let mut answer = request.payload.clone();
            answer.extend_from_slice(b" pong");
            subjects.respond(&reply, answer).await.expect("respond");
            request
        })
    };
    let answer = subjects.request(&subject, b"ping".to_vec(), ARRIVAL).await.expect("request answered");
    assert_eq!(answer.payload, b"ping pong");
    let request = responder.await.expect("responder");
    assert_eq!((request.subject, request.payload), (subject, b"ping".to_vec()));
}

/// A request nobody subscribes to fails at once with `NoResponders`; one whose subscriber stays silent fails with
/// `Timeout` once its timeout passes. Both are transient.
pub async fn request_timeout_and_no_responders(subjects: Arc<dyn Subjects>) {
    let subject = format!("{}.silent", root());
    let nobody = subjects.request(&subject, b"anyone?".to_vec(), ARRIVAL).await;
    assert!(matches!(nobody, Err(PortError::NoResponders(_))), "no subscriber: {nobody:?}");

    let mut silent = subjects.subscribe(&subject).await.expect("subscribe");
    let timed_out = subjects.request(&subject, b"hello?".to_vec(), Duration::from_millis(300)).await;
    assert!(matches!(timed_out, Err(PortError::Timeout(_))), "a silent subscriber: {timed_out:?}");
    assert!(timed_out.unwrap_err().is_transient());
    assert_eq!(next(&mut silent).await.payload, b"hello?", "the silent subscriber did get the request");
}

/// Each message on a queue group's subject goes to exactly one of its members (counted across members), and
/// more than one member takes part; a plain subscription beside the group still gets every message.
pub async fn queue_group_delivers_each_message_once(subjects: Arc<dyn Subjects>) {
    let root = root();
    let pattern = format!("{root}.jobs.*");
    let mut members = Vec::new();
    for _ in 0..3 {
        members.push(subjects.queue_subscribe(&pattern, "workers").await.expect("queue subscribe"));
    }
    let mut watcher = subjects.subscribe(&pattern).await.expect("subscribe");
    const COUNT: usize = 60;
    for i in 0..COUNT {
        subjects.publish(&format!("{root}.jobs.{i}"), i.to_string().into_bytes()).await.expect("publish");
    }

    let mut seen = Vec::new();
    let mut per_member = Vec::new();
    for member in &mut members {
        let mut got = 0;
        while let Ok(Some(message)) = tokio::time::timeout(QUIET, member.next()).await {
            seen.push(String::from_utf8(message.payload).expect("utf-8"));
            got += 1;
        }
        per_member.push(got);
    }
    let distinct: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(seen.len(), COUNT, "each message reaches exactly one member; per member {per_member:?}");
    assert_eq!(distinct.len(), COUNT, "no message reaches two members");
    assert!(per_member.iter().filter(|n| **n > 0).count() > 1, "the group shares the work: {per_member:?}");
    for _ in 0..COUNT {
        next(&mut watcher).await;
    }
    assert_quiet(&mut watcher, &pattern).await;
}

/// Headers travel with a message, a request and its answer (a signature rides there), names and values intact.
pub async fn headers_travel_with_messages_requests_and_answers(subjects: Arc<dyn Subjects>) {
    let subject = format!("{}.signed", root());
    let headers =
        vec![("flowhost-signature".to_owned(), "v1=00ff".to_owned()), ("x-trace".to_owned(), "t-1".to_owned())];
    let mut stream = subjects.subscribe(&subject).await.expect("subscribe");
    subjects.publish_with_headers(&subject, headers.clone(), b"body".to_vec()).await.expect("publish");
    let message = next(&mut stream).await;
    assert_eq!((message.payload.as_slice(), message.header("Flowhost-Signature")), (&b"body"[..], Some("v1=00ff")));
    assert_eq!(message.header("x-trace"), Some("t-1"));

    let service = format!("{}.rpc", root());
    let mut requests = subjects.subscribe(&service).await.expect("subscribe");
    let responder = {
        let subjects = Arc::clone(&subjects);
        tokio::spawn(async move {
            let request = next(&mut requests).await;
            let answer = vec![("flowhost-signature".to_owned(), "v1=abcd".to_owned())];
            let reply = request.reply.clone().expect("a reply address");
            subjects.respond_with_headers(&reply, answer, b"answer".to_vec()).await.expect("respond");
            request
        })
    };
    let answer =
        subjects.request_with_headers(&service, headers, b"ask".to_vec(), ARRIVAL).await.expect("request answered");
    assert_eq!((answer.payload.as_slice(), answer.header("flowhost-signature")), (&b"answer"[..], Some("v1=abcd")));
    let request = responder.await.expect("responder");
    assert_eq!(request.header("flowhost-signature"), Some("v1=00ff"), "the request's headers reached the responder");
}
