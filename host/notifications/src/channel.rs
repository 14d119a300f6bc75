//! The notification service's delivery channels (`FLOWHOST_CHANNELS_ENABLED`): web push and in-app.

use std::str::FromStr;

use flowhost_core::settings::{from_str, FromSetting};
use serde::{Deserialize, Serialize};

/// A delivery channel of the notification service (`FLOWHOST_CHANNELS_ENABLED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Channel {
    #[serde(rename = "WEB_PUSH")]
    WebPush,
    #[serde(rename = "IN_APP")]
    InApp,
}

impl FromStr for Channel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "WEB_PUSH" => Ok(Channel::WebPush),
            "IN_APP" => Ok(Channel::InApp),
            other => Err(format!("unknown channel {other:?} (known: WEB_PUSH, IN_APP)")),
        }
    }
}

impl FromSetting for Channel {
    fn from_setting(value: &str) -> Result<Self, String> {
        from_str(value)
    }
}
