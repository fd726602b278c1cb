//! `eddy ingest-http` as a child process, for the tests that drive agents through the HTTP
//! bridge against the real stack.
use super::daemon::{self, Daemon};
use super::free_addr;

/// `eddy ingest-http` on the test's topics, listening on a free port.
pub struct Bridge {
    pub addr: String,
    /// Its admin server (/metrics).
    pub admin: String,
    daemon: Daemon,
}

impl Bridge {
    /// Stop it and return what it logged.
    pub fn stop(self) -> String {
        self.daemon.stop()
    }
}

pub fn start_bridge(cfg: &eddy::config::Config, keys: &[(&str, &str)]) -> Bridge {
    start_bridge_on(cfg, keys, free_addr(), free_addr())
}

/// The bridge on given addresses (a restart on the address its clients know).
pub fn start_bridge_on(
    cfg: &eddy::config::Config,
    keys: &[(&str, &str)],
    addr: String,
    admin: String,
) -> Bridge {
    let toml = format!(
        "ingest_addr = {addr:?}\ningest_admin_addr = {admin:?}\n{}",
        daemon::base_toml(cfg, keys)
    );
    let daemon = daemon::start("ingest-http", &toml, &addr, true);
    Bridge {
        addr,
        admin,
        daemon,
    }
}
