//! Rust agents: report steps to eddy and stop when eddy says so.
//!
//! The two halves of the Python `eddy-agent` package, on the crate's own contract types:
//! an [`Emitter`] that puts v1 events on the input topic (key = run id, Kafka's murmur2
//! partitioner, `step_index` counted per run), and a [`Guard`] that reads the signals topic in
//! the background and answers [`Guard::check`] before each tool call without waiting on anything.
//!
//! ```no_run
//! # async fn agent() -> Result<(), Box<dyn std::error::Error>> {
//! use eddy::agent::{Emitter, Guard};
//! use eddy::contract::{RunStatus, Severity, Step};
//! let mut emitter = Emitter::new("127.0.0.1:9092", "agent.steps", "my-project")?;
//! let guard = Guard::start("127.0.0.1:9092", "agent.signals", "my-project", Severity::Stop)?;
//! guard.watch("run-42");
//! emitter.run_started("run-42", "researcher")?;
//! for q in ["a", "b"] {
//!     guard.check("run-42")?; // Err(LoopDetected) once eddy's stop verdict arrived
//!     emitter.tool_call("run-42", "web_search", &serde_json::json!({ "q": q }))?;
//! }
//! emitter.run_finished("run-42", RunStatus::Completed)?;
//! emitter.flush().await?;
//! # Ok(()) }
//! ```
mod emitter;
mod guard;

pub use emitter::Emitter;
pub use guard::{Guard, LoopDetected};

/// Why a guard or emitter call failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The event could not be delivered to Kafka.
    #[error(transparent)]
    Emit(#[from] crate::emit::EmitError),
    /// The event could not be serialised.
    #[error("cannot encode the event: {0}")]
    Encode(#[from] serde_json::Error),
    /// The signals topic could not be read.
    #[error(transparent)]
    Verdict(#[from] crate::verdict::VerdictError),
}
