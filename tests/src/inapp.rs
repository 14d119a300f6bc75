//! [`InAppSocket`]: a player's in-app websocket as the browser kit opens it: a connect token from the bridge
//! route, then `GET /api/v1/inapp/ws?token=&after=`, frames as JSON.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::push::{platform, OPS_TOKEN};
use crate::TestHost;

pub type Stream = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub struct InAppSocket {
    stream: Stream,
}

/// A connect token for `(tenant_id, player_id)` minted through the bridge route (as the `ops` caller).
pub async fn connect_token(host: &TestHost, tenant_id: &str, player_id: i64) -> String {
    let body = json!({ "tenant_id": tenant_id, "player_id": player_id });
    let (status, answer) = platform(host, OPS_TOKEN, "POST", "/api/v1/service/inapp/connect-tokens", Some(body)).await;
    assert_eq!(status, 201, "{answer}");
    answer["token"].as_str().unwrap().to_owned()
}

impl InAppSocket {
    /// Connects `(tenant_id, player_id)` to `host`, resuming after `after` when given, and reads the `hello`.
    pub async fn connect(
        host: &TestHost,
        tenant_id: &str,
        player_id: i64,
        after: Option<&str>,
    ) -> (InAppSocket, Value) {
        let token = connect_token(host, tenant_id, player_id).await;
        let mut url = format!("{}/api/v1/inapp/ws?token={token}", host.base_url.replacen("http", "ws", 1));
        if let Some(after) = after {
            url.push_str(&format!("&after={after}"));
        }
        let (stream, _) = tokio_tungstenite::connect_async(url).await.expect("websocket connect");
        let mut socket = InAppSocket { stream };
        let hello = socket.next_frame(Duration::from_secs(10)).await.expect("hello");
        assert_eq!(hello["type"], "hello", "{hello}");
        (socket, hello)
    }

    /// The next JSON frame within `wait`, skipping `ping`s (answered with `pong`); `None` on timeout or close.
    pub async fn next_frame(&mut self, wait: Duration) -> Option<Value> {
        let until = tokio::time::Instant::now() + wait;
        loop {
            let message = tokio::time::timeout_at(until, self.stream.next()).await.ok()??.ok()?;
            match message {
                Message::Text(text) => {
                    let frame: Value = serde_json::from_str(&text).expect("a JSON frame");
                    if frame["type"] == "ping" {
                        self.send(&json!({ "type": "pong" })).await;
                        continue;
                    }
                    return Some(frame);
                }
                Message::Close(_) => return None,
                _ => continue,
            }
        }
    }

    /// The next `message` frame's message within `wait`.
    pub async fn next_message(&mut self, wait: Duration) -> Option<Value> {
        loop {
            let frame = self.next_frame(wait).await?;
            if frame["type"] == "message" {
                return Some(frame["message"].clone());
            }
        }
    }

    /// Connects `(tenant_id, player_id)` over a socket with a 4 KiB receive buffer and never reads from it (a
    /// client that stopped reading); the socket stays open until dropped.
    pub async fn connect_not_reading(host: &TestHost, tenant_id: &str, player_id: i64) -> Stream {
        let token = connect_token(host, tenant_id, player_id).await;
        let url = format!("{}/api/v1/inapp/ws?token={token}", host.base_url.replacen("http", "ws", 1));
        let address: std::net::SocketAddr = host.base_url.trim_start_matches("http://").parse().expect("address");
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(4096).expect("receive buffer");
        let tcp = socket.connect(address).await.expect("connect");
        let (stream, _) = tokio_tungstenite::client_async(url, tokio_tungstenite::MaybeTlsStream::Plain(tcp))
            .await
            .expect("websocket connect");
        stream
    }

    /// Starts a text frame whose header announces `bytes` bytes, sends its first KiB and no more, and answers
    /// the close code the server ends the connection with within five seconds (`None`: it waits for the rest,
    /// buffering it, or closes without a code).
    pub async fn announce_huge_frame(&mut self, bytes: u64) -> Option<u16> {
        use tokio::io::AsyncWriteExt;
        // FIN + text, masked, 64-bit length, the mask key; then the first KiB, masked with a zero key.
        let mut header = vec![0x81, 0x80 | 127];
        header.extend_from_slice(&bytes.to_be_bytes());
        header.extend_from_slice(&[0, 0, 0, 0]);
        header.extend_from_slice(&[b'x'; 1024]);
        let tcp = match self.stream.get_mut() {
            tokio_tungstenite::MaybeTlsStream::Plain(tcp) => tcp,
            _ => unreachable!("the tests connect over plain TCP"),
        };
        tcp.write_all(&header).await.expect("write the frame's start");
        tcp.flush().await.expect("flush");
        let until = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            match tokio::time::timeout_at(until, self.stream.next()).await.ok()?? {
                Ok(Message::Close(frame)) => return frame.map(|f| f.code.into()),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
    }

    pub async fn send(&mut self, frame: &Value) {
        self.stream.send(Message::Text(frame.to_string().into())).await.expect("send a frame");
    }

    pub async fn close(mut self) {
        let _ = self.stream.close(None).await;
    }
}
