//! The subjects port inside one process: a broadcast channel filtered by NATS-style patterns. Delivery is
//! at-most-once, as with core NATS: a subscriber that falls far behind skips what it missed.

use async_trait::async_trait;
use flowhost_core::ports::{subject_matches, PortError, SubjectMessage, SubjectStream, Subjects};
use futures::StreamExt;
use tokio::sync::broadcast;

const CAPACITY: usize = 4096;

#[derive(Debug, Clone)]
pub struct LocalSubjects {
    sender: broadcast::Sender<SubjectMessage>,
}

impl Default for LocalSubjects {
    fn default() -> Self {
        Self::new()
    }
}

impl LocalSubjects {
    pub fn new() -> Self {
        Self { sender: broadcast::channel(CAPACITY).0 }
    }
}

#[async_trait]
impl Subjects for LocalSubjects {
    fn backend(&self) -> &'static str {
        "embedded"
    }

    async fn publish(&self, subject: &str, payload: Vec<u8>) -> Result<(), PortError> {
        if subject.is_empty() || subject.contains(['*', '>', ' ']) {
            return Err(PortError::Invalid(format!("cannot publish to subject {subject:?}")));
        }
        // No subscriber is not an error: core NATS drops such messages too.
        let _ = self.sender.send(SubjectMessage { subject: subject.to_owned(), payload });
        Ok(())
    }

    async fn subscribe(&self, pattern: &str) -> Result<SubjectStream, PortError> {
        if pattern.is_empty() || pattern.contains(' ') {
            return Err(PortError::Invalid(format!("cannot subscribe to {pattern:?}")));
        }
        let pattern = pattern.to_owned();
        let receiver = self.sender.subscribe();
        let stream = futures::stream::unfold(receiver, |mut receiver| async move {
            loop {
                match receiver.recv().await {
                    Ok(message) => return Some((message, receiver)),
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        })
        .filter(move |message| std::future::ready(subject_matches(&pattern, &message.subject)));
        Ok(stream.boxed())
    }
}
