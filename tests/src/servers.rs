//! Addresses of the real servers that `tests/run.sh` starts on loopback (see `tests/scripts/servers.sh`).
//! A test that needs one fails (never skips) when it is not configured: skipping in CI would hide a defect.

fn required(name: &str) -> String {
    match std::env::var(name) {
        Ok(value) if !value.trim().is_empty() => value,
        _ => panic!(
            "{name} is not set: run the suite through `bash tests/run.sh`, or start the servers with \
             `tests/scripts/servers.sh start DIR` and `source DIR/env`"
        ),
    }
}

pub fn kafka_brokers() -> String {
    required("FLOWHOST_TEST_KAFKA_BROKERS")
}

pub fn mongodb_uri() -> String {
    required("FLOWHOST_TEST_MONGODB_URI")
}

pub fn nats_url() -> String {
    required("FLOWHOST_TEST_NATS_URL")
}

/// The NATS server's URL signed in to the account `blue` (a deployment of its own: see `servers.sh`).
pub fn nats_blue_url() -> String {
    required("FLOWHOST_TEST_NATS_BLUE_URL")
}

/// The NATS server's URL signed in to the account `green`.
pub fn nats_green_url() -> String {
    required("FLOWHOST_TEST_NATS_GREEN_URL")
}

pub fn redis_url() -> String {
    required("FLOWHOST_TEST_REDIS_URL")
}

/// The Kafka-protocol broker binary, for tests that start (and pause) a private instance.
pub fn tansu_bin() -> String {
    required("FLOWHOST_TEST_TANSU_BIN")
}

/// The MongoDB-protocol server binary, for tests that start (and pause) a private instance.
pub fn nx27017_bin() -> String {
    required("FLOWHOST_TEST_NX27017_BIN")
}

/// The Python of the test tools' virtual environment (with `http_ece` and `cryptography`), for the local push
/// service of the web-push tests (`tests/scripts/push_service.py`).
pub fn python() -> String {
    required("FLOWHOST_TEST_PYTHON")
}
