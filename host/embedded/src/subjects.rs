//! The subjects port inside one process: a registry of live subscriptions, each with its own bounded queue,
//! matched against NATS-style patterns on every publish. Subscriptions to one exact subject (a player's delivery
//! subject, a request's inbox) are found with one lookup, so thousands of them cost a publish nothing; only
//! wildcard patterns are matched one by one. Plain subscriptions each get a copy; the members of a queue group
//! share one copy, handed round-robin to the next live member with room. Request/reply publishes with a fresh
//! `_INBOX.` reply subject and waits on a subscription to it. Dropping a subscription's stream removes it.
//!
//! Delivery is at-most-once, as with core NATS: a subscriber whose queue is full (it fell [`CAPACITY`] messages
//! behind) misses the message.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use flowhost_core::ports::{subject_matches, Headers, PortError, SubjectMessage, SubjectStream, Subjects};
use futures::StreamExt;
use tokio::sync::mpsc;

/// Messages a subscription may have waiting before it misses new ones.
const CAPACITY: usize = 4096;

struct Subscription {
    id: u64,
    pattern: String,
    group: Option<String>,
    sender: mpsc::Sender<SubjectMessage>,
}

#[derive(Default)]
struct Registry {
    /// Subscriptions to one exact subject, by that subject.
    exact: HashMap<String, Vec<Subscription>>,
    /// Subscriptions with a wildcard (`*`, `>`).
    patterns: Vec<Subscription>,
    /// Per queue group, how many messages it was handed: where the round-robin starts next time.
    turns: HashMap<String, usize>,
}

impl Registry {
    fn remove(&mut self, pattern: &str, id: u64) {
        if is_pattern(pattern) {
            self.patterns.retain(|s| s.id != id);
        } else if let Some(list) = self.exact.get_mut(pattern) {
            list.retain(|s| s.id != id);
            if list.is_empty() {
                self.exact.remove(pattern);
            }
        }
    }
}

fn is_pattern(pattern: &str) -> bool {
    pattern.split('.').any(|token| token == "*" || token == ">")
}

/// Removes its subscription from the registry when the subscription's stream is dropped.
struct Unsubscribe {
    registry: Weak<Mutex<Registry>>,
    pattern: String,
    id: u64,
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        if let Some(registry) = self.registry.upgrade() {
            registry.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.pattern, self.id);
        }
    }
}

#[derive(Clone, Default)]
pub struct LocalSubjects {
    registry: Arc<Mutex<Registry>>,
    /// Numbers the inboxes of requests and the subscriptions.
    ids: Arc<AtomicU64>,
}

impl std::fmt::Debug for LocalSubjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        let count = registry.patterns.len() + registry.exact.values().map(Vec::len).sum::<usize>();
        f.debug_struct("LocalSubjects").field("subscriptions", &count).finish()
    }
}

impl LocalSubjects {
    pub fn new() -> Self {
        Self::default()
    }

    fn add(&self, pattern: &str, group: Option<&str>) -> Result<SubjectStream, PortError> {
        let valid = |s: &str| !s.is_empty() && !s.contains(char::is_whitespace);
        if !valid(pattern) || !group.is_none_or(valid) {
            return Err(PortError::Invalid(format!("cannot subscribe to {pattern:?} (group {group:?})")));
        }
        let (sender, receiver) = mpsc::channel(CAPACITY);
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let subscription = Subscription { id, pattern: pattern.to_owned(), group: group.map(str::to_owned), sender };
        {
            let mut registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
            if is_pattern(pattern) {
                registry.patterns.push(subscription);
            } else {
                registry.exact.entry(pattern.to_owned()).or_default().push(subscription);
            }
        }
        let guard = Unsubscribe { registry: Arc::downgrade(&self.registry), pattern: pattern.to_owned(), id };
        let stream = futures::stream::unfold((receiver, guard), |(mut receiver, guard)| async move {
            receiver.recv().await.map(|message| (message, (receiver, guard)))
        });
        Ok(stream.boxed())
    }

    /// Hands the message to every matching plain subscription and to one member of every matching queue
    /// group; returns whether any subscription matched (for "no responders").
    fn deliver(&self, message: SubjectMessage) -> bool {
        let mut registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        let Registry { exact, patterns, turns } = &mut *registry;
        let matching = exact
            .get(&message.subject)
            .into_iter()
            .flatten()
            .chain(patterns.iter().filter(|subscription| subject_matches(&subscription.pattern, &message.subject)));
        let mut matched = false;
        let mut groups: BTreeMap<&str, Vec<&Subscription>> = BTreeMap::new();
        for subscription in matching {
            matched = true;
            match &subscription.group {
                Some(group) => groups.entry(group.as_str()).or_default().push(subscription),
                // A full queue is a slow consumer: it misses this message, as on NATS.
                None => drop(subscription.sender.try_send(message.clone())),
            }
        }
        for (group, members) in groups {
            let turn = turns.get(group).copied().unwrap_or(0);
            // Start at this group's turn and skip members that are full, so one stuck member does not
            // starve the group.
            for step in 0..members.len() {
                if members[(turn + step) % members.len()].sender.try_send(message.clone()).is_ok() {
                    break;
                }
            }
            turns.insert(group.to_owned(), turn.wrapping_add(1));
        }
        matched
    }
}

fn check_subject(subject: &str) -> Result<(), PortError> {
    if subject.is_empty() || subject.contains(['*', '>']) || subject.contains(char::is_whitespace) {
        return Err(PortError::Invalid(format!("cannot publish to subject {subject:?}")));
    }
    Ok(())
}

#[async_trait]
impl Subjects for LocalSubjects {
    fn backend(&self) -> &'static str {
        "embedded"
    }

    async fn publish_with_headers(&self, subject: &str, headers: Headers, payload: Vec<u8>) -> Result<(), PortError> {
        check_subject(subject)?;
        // No subscriber is not an error: core NATS drops such messages too.
        self.deliver(SubjectMessage { headers, ..SubjectMessage::new(subject, payload) });
        Ok(())
    }

    async fn subscribe(&self, pattern: &str) -> Result<SubjectStream, PortError> {
        self.add(pattern, None)
    }

    async fn queue_subscribe(&self, pattern: &str, group: &str) -> Result<SubjectStream, PortError> {
        self.add(pattern, Some(group))
    }

    async fn request_with_headers(
        &self,
        subject: &str,
        headers: Headers,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> Result<SubjectMessage, PortError> {
        check_subject(subject)?;
        let inbox = format!("_INBOX.{}", self.ids.fetch_add(1, Ordering::Relaxed));
        let mut replies = self.add(&inbox, None)?;
        let message = SubjectMessage { subject: subject.to_owned(), payload, reply: Some(inbox), headers };
        if !self.deliver(message) {
            return Err(PortError::NoResponders(format!("no subscription answers {subject:?}")));
        }
        match tokio::time::timeout(timeout, replies.next()).await {
            Ok(Some(reply)) => Ok(reply),
            Ok(None) => Err(PortError::Backend(format!("the reply subscription of {subject:?} closed"))),
            Err(_) => Err(PortError::Timeout(format!("no reply to {subject:?} within {timeout:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Members of a group take turns; a dropped member stops getting messages at once.
    #[tokio::test]
    async fn queue_group_round_robin_skips_dropped_members() {
        let subjects = LocalSubjects::new();
        let mut a = subjects.queue_subscribe("q.>", "g").await.unwrap();
        let b = subjects.queue_subscribe("q.>", "g").await.unwrap();
        subjects.publish("q.1", b"1".to_vec()).await.unwrap();
        subjects.publish("q.2", b"2".to_vec()).await.unwrap();
        drop(b);
        subjects.publish("q.3", b"3".to_vec()).await.unwrap();
        let first = a.next().await.unwrap().payload;
        let second = a.next().await.unwrap().payload;
        assert_eq!((first.len(), second), (1, b"3".to_vec()), "a got one of 1/2, then 3 once b was gone");
    }

    /// Exact subjects and patterns both match; a dropped stream leaves the registry at once, so a request to a
    /// subject nobody holds any more has no responders.
    #[tokio::test]
    async fn exact_and_pattern_subscriptions_and_unsubscribe_on_drop() {
        let subjects = LocalSubjects::new();
        let mut exact = subjects.subscribe("p.one").await.unwrap();
        let mut pattern = subjects.subscribe("p.*").await.unwrap();
        subjects.publish("p.one", b"1".to_vec()).await.unwrap();
        assert_eq!(exact.next().await.unwrap().payload, b"1");
        assert_eq!(pattern.next().await.unwrap().payload, b"1");
        drop(exact);
        drop(pattern);
        {
            let registry = subjects.registry.lock().unwrap();
            assert!(registry.exact.is_empty() && registry.patterns.is_empty());
        }
        let answer = subjects.request("p.one", b"?".to_vec(), Duration::from_secs(1)).await;
        assert!(matches!(answer, Err(PortError::NoResponders(_))), "{answer:?}");
    }
}
