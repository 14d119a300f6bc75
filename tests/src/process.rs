//! A server process a test started itself (a private Redis, NATS, MongoDB-protocol or Kafka-protocol server to
//! freeze with SIGSTOP, kill and start again on the same port, or to start only after Flowhost): resumed and
//! killed when dropped, also when the test fails.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::servers;

pub struct Private {
    pub child: Child,
    /// Its pid, log and data files; removed after the process is killed (fields drop after `Drop::drop`).
    _dir: Option<tempfile::TempDir>,
}

impl Private {
    /// A process of the test (e.g. a `flowhost` it started).
    pub fn new(child: Child) -> Private {
        Private { child, _dir: None }
    }

    /// Sends `signal` (`STOP`, `CONT`, ...) to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.child.id().to_string()).status();
        assert!(status.unwrap().success(), "kill -{signal}");
    }

    /// Kills the process (SIGKILL) and waits for it: the server is gone, as after a crash.
    pub fn kill(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let _ = Command::new("kill").arg("-CONT").arg(self.child.id().to_string()).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A port free right now on loopback, for a listener that needs a known port (a second listener, a process's
/// address, the gateway's ingest URL that the edge posts to). Taken below Linux's ephemeral range (32768-60999): a port the kernel handed out for `:0`
/// could be handed out again for an outgoing connection of a concurrent test before the listener binds it. No
/// port is given twice in one process.
pub fn free_port() -> u16 {
    use std::sync::Mutex;
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    const FIRST: u16 = 20_000;
    const COUNT: u16 = 12_000;
    let mut given = GIVEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let start = (uuid::Uuid::new_v4().as_u128() % u128::from(COUNT)) as u16;
    (0..COUNT)
        .map(|step| FIRST + (start + step) % COUNT)
        .find(|port| !given.contains(port) && std::net::TcpListener::bind(("127.0.0.1", *port)).is_ok())
        .inspect(|port| given.push(*port))
        .expect("a free port below the ephemeral range")
}

/// `127.0.0.1:` and a [`free_port`].
pub fn free_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// Waits until something accepts connections on `port` (at most 20 s).
pub async fn wait_for_port(port: u16) {
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(tokio::time::Instant::now() < until, "the private server on port {port} did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn spawn(command: &mut Command, dir: Option<tempfile::TempDir>) -> Private {
    let child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start a private server");
    Private { child, _dir: dir }
}

/// A Redis on `port` (installed by tests/scripts/servers.sh), without persistence; `redis://127.0.0.1:{port}`.
pub async fn redis(port: u16) -> Private {
    let server = spawn(
        Command::new("redis-server").args(["--bind", "127.0.0.1", "--port", &port.to_string()]).args([
            "--save",
            "",
            "--appendonly",
            "no",
        ]),
        None,
    );
    wait_for_port(port).await;
    server
}

/// A NATS server on `port`; `nats://127.0.0.1:{port}`.
pub async fn nats(port: u16) -> Private {
    let server = spawn(Command::new("nats-server").args(["-a", "127.0.0.1", "-p", &port.to_string()]), None);
    wait_for_port(port).await;
    server
}

/// A MongoDB-protocol server on `port`, in memory; `mongodb://127.0.0.1:{port}`.
pub async fn mongodb(port: u16) -> Private {
    let dir = tempfile::tempdir().unwrap();
    let server = spawn(
        Command::new(servers::nx27017_bin())
            .args(["--db", "memory", "--host", "127.0.0.1", "-p", &port.to_string()])
            .arg("--pid-file")
            .arg(dir.path().join("pid"))
            .arg("--log-file")
            .arg(dir.path().join("log")),
        Some(dir),
    );
    wait_for_port(port).await;
    server
}

/// A Kafka-protocol broker on `port`, in memory; brokers `127.0.0.1:{port}`.
pub async fn kafka(port: u16) -> Private {
    let address = format!("tcp://127.0.0.1:{port}");
    let server = spawn(
        Command::new(servers::tansu_bin())
            .args(["broker", "--listener-url", &address, "--advertised-listener-url", &address])
            .args(["--storage-engine", "memory://tansu/"])
            .env("RUST_LOG", "warn"),
        None,
    );
    wait_for_port(port).await;
    server
}
