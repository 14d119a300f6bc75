//! `push_subscription_keys`: the body of `POST /api/v1/service/webpush/subscriptions`, checked as the route
//! checks it; a subscription it accepts must be one the sender can encrypt a push message for with its keys
//! (`keys.p256dh`, `keys.auth`), or every notification to it fails after a 201.

use flowhost_notifications::push::ece;
use flowhost_notifications::vapid::decode_base64url;
use flowhost_push_api::{new_subscription, parse_object};

pub fn push_subscription_keys(data: &[u8]) {
    let Ok(body) = parse_object(data) else { return };
    let Ok(subscription) = new_subscription(&body, false, "fuzz", "fuzz") else { return };
    let (Some(p256dh), Some(auth)) = (decode_base64url(&subscription.p256dh), decode_base64url(&subscription.auth))
    else {
        panic!("accepted keys that do not decode: {subscription:?}");
    };
    if let Err(error) = ece::encrypt(br#"{"title":"hi"}"#, &p256dh, &auth) {
        panic!("accepted a subscription no message can be encrypted for ({error}): {subscription:?}");
    }
}
