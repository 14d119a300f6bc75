//! The presence validator's error codes (spec 002 part B's input rules, docs/presence.md): the only
//! rejections of a record that are permanent. The bundled `presence` plugin answers them as `permanent`; the
//! host's projector dead-letters a `permanent` answer only when its code is one of these, so a plugin version
//! that refuses valid records with any other code (or traps) blocks and retries the partition instead of
//! dead-lettering valid events. One list for both sides, so they cannot drift.

#![no_std]

/// Every validator code.
pub const VALIDATION_CODES: [&str; 15] = [
    "malformed_json",
    "unsupported_envelope_version",
    "unsupported_schema_version",
    "unsupported_event_type",
    "invalid_source",
    "invalid_event_id",
    "invalid_session_id",
    "invalid_received_at",
    "received_at_in_future",
    "invalid_occurred_at",
    "invalid_tenant_id",
    "invalid_site_id",
    "invalid_user_id",
    "invalid_action",
    "invalid_close_reason",
];
