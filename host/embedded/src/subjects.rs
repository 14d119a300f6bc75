//! The subjects port inside one process: a registry of live subscriptions, each with its own bounded queue,
//! matched against NATS-style patterns on every publish. Plain subscriptions each get a copy; the members of a
//! queue group share one copy, handed round-robin to the next live member with room. Request/reply publishes
//! with a fresh `_INBOX.` reply subject and waits on a subscription to it.
//!
//! Delivery is at-most-once, as with core NATS: a subscriber whose queue is full (it fell [`CAPACITY`] messages
//! behind) misses the message, and a dropped subscription stops counting at the next publish.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use flowhost_core::ports::{subject_matches, Headers, PortError, SubjectMessage, SubjectStream, Subjects};
use futures::StreamExt;
use tokio::sync::mpsc;

/// Messages a subscription may have waiting before it misses new ones.
const CAPACITY: usize = 4096;

struct Subscription {
    pattern: String,
    group: Option<String>,
    sender: mpsc::Sender<SubjectMessage>,
}

#[derive(Default)]
struct Registry {
    subscriptions: Vec<Subscription>,
    /// Per queue group, how many messages it was handed: where the round-robin starts next time.
    turns: HashMap<String, usize>,
}

#[derive(Clone, Default)]
pub struct LocalSubjects {
    registry: Arc<Mutex<Registry>>,
    inboxes: Arc<AtomicU64>,
}

impl std::fmt::Debug for LocalSubjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        f.debug_struct("LocalSubjects").field("subscriptions", &registry.subscriptions.len()).finish()
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
        self.registry.lock().unwrap_or_else(|p| p.into_inner()).subscriptions.push(Subscription {
            pattern: pattern.to_owned(),
            group: group.map(str::to_owned),
            sender,
        });
        let stream = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|message| (message, receiver))
        });
        Ok(stream.boxed())
    }

    /// Hands the message to every matching plain subscription and to one member of every matching queue
    /// group; returns whether any subscription matched (for "no responders").
    fn deliver(&self, message: SubjectMessage) -> bool {
        let mut registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        registry.subscriptions.retain(|s| !s.sender.is_closed());
        let mut matched = false;
        let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (index, subscription) in registry.subscriptions.iter().enumerate() {
            if !subject_matches(&subscription.pattern, &message.subject) {
                continue;
            }
            matched = true;
            match &subscription.group {
                Some(group) => groups.entry(group.clone()).or_default().push(index),
                // A full queue is a slow consumer: it misses this message, as on NATS.
                None => drop(subscription.sender.try_send(message.clone())),
            }
        }
        for (group, members) in groups {
            let turn = registry.turns.get(&group).copied().unwrap_or(0);
            // Start at this group's turn and skip members that are full, so one stuck member does not
            // starve the group.
            for step in 0..members.len() {
                let member = &registry.subscriptions[members[(turn + step) % members.len()]];
                if member.sender.try_send(message.clone()).is_ok() {
                    break;
                }
            }
            registry.turns.insert(group, turn.wrapping_add(1));
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
        let inbox = format!("_INBOX.{}", self.inboxes.fetch_add(1, Ordering::Relaxed));
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
}
