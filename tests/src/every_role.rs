//! A host running every role that serves HTTP, with each listener on a socket of its own (the gateway's five,
//! push, presence, campaigns beside the main one), for the suites that walk every socket's OpenAPI document.
//! Without the sender: requests made up from a document must not become web pushes to the endpoints they name.

use flowhost_core::config::Config;

use crate::gateway::{configure, GatewayAddrs, PlayerBackend};
use crate::process::free_addr;
use crate::{Backends, TestHost};

/// The gateway origin the host accepts events from.
pub const ORIGIN: &str = "https://casino.example";

pub struct EveryRole {
    pub host: TestHost,
    /// The base URL of every socket, the main one first.
    pub sockets: Vec<String>,
    /// The base URL of the push API's socket (one of `sockets`).
    pub push: String,
    _player_backend: PlayerBackend,
}

impl EveryRole {
    pub async fn start(backends: Backends) -> EveryRole {
        let backend = PlayerBackend::start().await;
        let gateway = GatewayAddrs::free();
        let (push, presence, campaigns) = (free_addr(), free_addr(), free_addr());
        let host = TestHost::start_configured(backends, None, |config| {
            configure(config, &gateway, &[ORIGIN], &backend);
            config.roles = vec![
                "admin".to_owned(),
                "engine".to_owned(),
                "push-api".to_owned(),
                "gateway".to_owned(),
                "presence".to_owned(),
                "campaigns".to_owned(),
            ];
            config.section_mut::<flowhost_push_api::PushConfig>().listen = Some(push.clone());
            configure_presence_and_campaigns(config, backends, &presence, &campaigns);
            // Outbound calls to names a request made up go nowhere but loopback.
            config.egress.allowed = vec!["127.0.0.1".to_owned()];
        })
        .await;
        host.wait_ready().await;
        let push = format!("http://{push}");
        let mut sockets = vec![host.base_url.clone(), push.clone()];
        sockets.extend([presence, campaigns].iter().map(|addr| format!("http://{addr}")));
        sockets.extend(
            [gateway.edge, gateway.ingest, gateway.admin, gateway.private, gateway.metrics]
                .iter()
                .map(|addr| format!("http://{addr}")),
        );
        // The presence projector's input topic, as the gateway's worker creates its own in production: a member
        // subscribed to no existing topic is never assigned, and presence is ready only once assigned.
        let input = host.config.section::<flowhost_presence::PresenceConfig>().input_topic.clone();
        let _ = host.ports.topics.create_topic(&input, 1).await;
        // Every socket ready too (the presence consumer joins its group on Kafka after the main socket is
        // ready), or a listener without readiness (the gateway's metrics listener answers no `/ready`).
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(90);
        for socket in &sockets {
            loop {
                let status = host.http.get(format!("{socket}/ready")).send().await.map(|r| r.status().as_u16());
                if matches!(status, Ok(200 | 404)) {
                    break;
                }
                assert!(tokio::time::Instant::now() < until, "{socket} never ready: {status:?}");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
        EveryRole { host, sockets, push, _player_backend: backend }
    }
}

/// Runs the presence projector on `presence` (its consumer on `backends`' broker, its documents in MongoDB on the
/// real servers) and the campaign events API on `campaigns` (its own read-model database), both named afresh.
pub fn configure_presence_and_campaigns(config: &mut Config, backends: Backends, presence: &str, campaigns: &str) {
    config.section_mut::<flowhost_campaigns::CampaignsConfig>().listen = campaigns.to_owned();
    config.section_mut::<flowhost_campaigns::CampaignsConfig>().database = crate::unique("campaigns").replace('-', "_");
    let presence_config = config.section_mut::<flowhost_presence::PresenceConfig>();
    presence_config.http_addr = presence.to_owned();
    presence_config.group = crate::unique("presence");
    presence_config.input_topic = crate::unique("presence.events");
    match backends {
        Backends::Embedded => presence_config.bootstrap_servers = vec!["embedded".to_owned()],
        Backends::Distributed => {
            presence_config.bootstrap_servers = vec![crate::servers::kafka_brokers()];
            presence_config.docdb_uri = Some(flowhost_core::config::Secret::new(crate::servers::mongodb_uri()));
            presence_config.dlq_replication_factor = 1;
            // A topic created after the member subscribed is seen within a second, not at librdkafka's
            // five-minute metadata refresh (presence is ready only once assigned).
            config.kafka.properties.insert("topic.metadata.refresh.interval.ms".into(), "1000".into());
        }
    }
}
