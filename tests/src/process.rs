//! A server process a test started itself (a private Redis or MongoDB-protocol server to freeze with
//! SIGSTOP): resumed and killed when dropped, also when the test fails.

pub struct Private(pub std::process::Child);

impl Private {
    /// Sends `signal` (`STOP`, `CONT`, ...) to the process.
    pub fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill").arg(format!("-{signal}")).arg(self.0.id().to_string()).status();
        assert!(status.unwrap().success(), "kill -{signal}");
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill").arg("-CONT").arg(self.0.id().to_string()).status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
