//! An optional external HTTP JSON source (the support-case source, the external campaign source): one `GET`
//! with query parameters, a bearer when configured, a bounded wait and answer, a JSON body.

use std::time::Duration;

use flowhost_core::config::Secret;
use serde::de::DeserializeOwned;

/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer read (a bigger one is a failure, not a partial read).
pub const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

#[derive(Clone)]
pub struct JsonSource {
    pub url: String,
    token: Option<Secret>,
    http: reqwest::Client,
}

impl std::fmt::Debug for JsonSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonSource").field("url", &self.url).finish_non_exhaustive()
    }
}

impl JsonSource {
    pub fn new(url: String, token: Option<Secret>) -> Result<JsonSource, reqwest::Error> {
        let http = reqwest::Client::builder().timeout(TIMEOUT).build()?;
        Ok(JsonSource { url, token, http })
    }

    /// `GET <url>?<query>`: the decoded answer, or why there is none (for the log: never the token).
    pub async fn get<T: DeserializeOwned>(&self, query: &[(&str, &str)]) -> Result<T, String> {
        let mut request = self.http.get(&self.url).query(query);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token.expose());
        }
        let mut response = request.send().await.map_err(|e| e.without_url().to_string())?;
        if !response.status().is_success() {
            return Err(format!("answered {}", response.status()));
        }
        if response.content_length().is_some_and(|length| length > MAX_ANSWER_BYTES as u64) {
            return Err(format!("answer larger than {MAX_ANSWER_BYTES} bytes"));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| e.without_url().to_string())? {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(format!("answer larger than {MAX_ANSWER_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| format!("unexpected answer: {e}"))
    }
}
