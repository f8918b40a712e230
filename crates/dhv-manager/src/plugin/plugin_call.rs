//! One plugin call and its evidence: what was asked, how long it took, what
//! came of it, and (for an executable) the raw process record.

use std::time::{Duration, Instant};

use super::{PluginError, PluginRun};
use crate::contract::Operation;

/// A plugin call: the result together with the call's evidence.
#[derive(Debug, Clone)]
pub struct PluginCall<T> {
    /// The operation called.
    pub operation: Operation,
    /// The request, as the `DHV_*` variables sent (for the built-in, the ones
    /// an executable would have been sent).
    pub request: Vec<(String, String)>,
    /// The decoded result, with Nomad's error text on failure.
    pub result: Result<T, PluginError>,
    /// The raw process record, for an executable.
    pub run: Option<PluginRun>,
    /// How long the call took: the process's run time, or the in-process call's.
    pub duration: Duration,
}

impl<T> PluginCall<T> {
    /// A call made in-process, timed around `work`.
    pub async fn timed(
        operation: Operation,
        request: Vec<(String, String)>,
        work: impl std::future::Future<Output = Result<T, PluginError>>,
    ) -> PluginCall<T> {
        let start = Instant::now();
        let result = work.await;
        PluginCall {
            operation,
            request,
            result,
            run: None,
            duration: start.elapsed(),
        }
    }

    /// A call made through a process, timed by the runner.
    pub fn from_run(
        operation: Operation,
        run: PluginRun,
        result: Result<T, PluginError>,
    ) -> PluginCall<T> {
        PluginCall {
            operation,
            request: run.env.clone(),
            result,
            duration: run.duration(),
            run: Some(run),
        }
    }

    /// Whether the call succeeded as Nomad judges it (started, exit 0, output accepted).
    pub fn ok(&self) -> bool {
        self.result.is_ok()
    }

    /// Nomad's error text, or "" on success.
    pub fn error_text(&self) -> String {
        self.result
            .as_ref()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    /// Whether the plugin itself succeeded (started, exited 0, in time),
    /// whatever Nomad then makes of its output. For the built-in: whether
    /// the call succeeded.
    pub fn exited_zero(&self) -> bool {
        match &self.run {
            Some(run) => run.succeeded(),
            None => self.result.is_ok(),
        }
    }

    /// Whether it was killed for running past its limit.
    pub fn timed_out(&self) -> bool {
        self.run.as_ref().is_some_and(PluginRun::timed_out)
    }

    /// The result alone, for callers that need no evidence.
    pub fn into_result(self) -> Result<T, PluginError> {
        self.result
    }
}
