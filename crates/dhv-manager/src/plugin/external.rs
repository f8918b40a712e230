//! An executable plugin, run exactly as Nomad runs it: argv `[path, op]`, only
//! the `DHV_*` variables, stdin `/dev/null`, Nomad's time limits, Nomad's decoding
//! and Nomad's error texts.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::transport::{LocalProcess, Transport};
use super::{
    BoxFuture, CallOptions, Fingerprint, HostVolumePlugin, PluginCall, PluginError, exec_failure,
};
use crate::contract::{self, CreateRequest, CreateResponse, DeleteRequest, Operation};
use crate::version::VersionInfo;
use dhv_host::exec::{Call, Supervisor};

/// The most stdout a call may print and still be decoded exactly as Nomad
/// decodes it (16 MiB). Nomad reads stdout whole, without a limit; we keep up
/// to this much while a call runs, drain the rest, and say plainly that an
/// answer past it is too large to judge. What is kept of a call afterwards
/// (in its [`PluginRun`] and in reports) is the smaller output cap.
pub const DECODE_LIMIT: usize = 16 << 20;

pub use super::record::{PluginRun, Recorder, StartFailure, shell_quote};

pub use super::timeouts::Timeouts;

/// A plugin executable and the way it is run.
#[derive(Debug, Clone)]
pub struct ExternalPlugin {
    /// The id, for display (lossy where it is not UTF-8).
    id: String,
    /// The id as it is: what Nomad's messages quote (`%q` of any bytes).
    raw_id: OsString,
    /// The path Nomad runs it by: `argv[0]`, in reports and errors.
    executable: PathBuf,
    /// The file that runs: the one [`lookup`](Self::lookup) checked.
    program: PathBuf,
    plugin_dir: PathBuf,
    /// How its calls are made, as the caller gave it: each call is
    /// described from it, in [`call`](Self::call). Its supervisor is moved
    /// out to `supervisor`.
    opts: CallOptions,
    /// The supervisor its calls run under: the caller's, or one of its own.
    supervisor: Supervisor,
    /// How much of each call's output is kept once judged.
    output_cap: usize,
}

impl ExternalPlugin {
    /// Runs the path it is started as (`<plugin_dir>/<id>`), not the file
    /// its lookup checked: exactly what Nomad executes, so a plugin that is a
    /// symlink sees the link's path as `$0`. A symlink swapped after the
    /// lookup then decides what runs, as under Nomad.
    pub fn exec_by_path(mut self) -> Self {
        self.program = self.executable.clone();
        self
    }

    pub(super) fn new(
        id: &OsStr,
        executable: PathBuf,
        program: PathBuf,
        plugin_dir: PathBuf,
    ) -> ExternalPlugin {
        ExternalPlugin {
            id: id.to_string_lossy().into_owned(),
            raw_id: id.to_os_string(),
            executable,
            program,
            plugin_dir,
            opts: CallOptions::default(),
            supervisor: Supervisor::new(),
            output_cap: dhv_host::exec::DEFAULT_OUTPUT_CAP,
        }
    }

    /// Makes its calls as `opts` says (see [`CallOptions`]): its time
    /// limits, kill mode, environment, recorder and the rest are the ones
    /// given here, not any given before.
    pub fn with_options(mut self, mut opts: CallOptions) -> Self {
        if let Some(supervisor) = opts.supervisor.take() {
            self.supervisor = supervisor;
        }
        if opts.exec_by_path {
            self = self.exec_by_path();
        }
        self.opts = opts;
        self
    }

    /// Runs its process through `transport` (a container, a remote node)
    /// instead of as a local process.
    pub fn with_transport(mut self, transport: std::sync::Arc<dyn Transport>) -> Self {
        self.opts.transport = Some(transport);
        self
    }

    /// Uses these time limits.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.opts.timeouts = timeouts;
        self
    }

    /// Caps what is kept of each call's stdout and stderr once it has been
    /// judged (stdout is decoded whole up to [`DECODE_LIMIT`] first).
    pub fn with_output_cap(mut self, bytes: usize) -> Self {
        self.output_cap = bytes;
        self
    }

    /// Records every call into `recorder`.
    pub fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.opts.recorder = Some(recorder);
        self
    }

    /// The supervisor the calls run under.
    pub fn supervisor(&self) -> &Supervisor {
        &self.supervisor
    }

    /// The executable's path, as Nomad passes it (`argv[0]`).
    pub fn executable(&self) -> &Path {
        &self.executable
    }

    /// The file that runs: for a plugin found by [`lookup`](Self::lookup),
    /// the one it checked (symlinks resolved), else the executable.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The plugin dir (what `DHV_PLUGIN_DIR` is set to).
    pub fn plugin_dir(&self) -> &Path {
        &self.plugin_dir
    }

    /// The time limits in force.
    pub fn timeouts(&self) -> Timeouts {
        self.opts.timeouts
    }

    /// Runs `PLUGIN op` with `env` (plus any extra env) under the limit for `op`,
    /// and records it. The building block of every operation.
    pub async fn run(&self, op: &str, env: Vec<(String, String)>) -> PluginRun {
        self.run_with_timeout(op, env, self.opts.timeouts.for_operation(op))
            .await
    }

    /// [`run`](Self::run) with an explicit time limit.
    pub async fn run_with_timeout(
        &self,
        op: &str,
        env: Vec<(String, String)>,
        timeout: Duration,
    ) -> PluginRun {
        let run = self.execute(op, env, timeout).await;
        self.keep(run)
    }

    /// Runs one call, stdout kept up to [`DECODE_LIMIT`] for judging; not
    /// recorded yet (see [`keep`](Self::keep)). The record's facts of what
    /// ran are the call's own.
    async fn execute(&self, op: &str, env: Vec<(String, String)>, timeout: Duration) -> PluginRun {
        if let Some(pin) = &self.opts.pin {
            // The one place every call of the plugin starts from.
            pin.before_call();
        }
        let call = self.call(op, env, timeout);
        let started_at = Instant::now();
        // The transport of its options (a container, a remote node), else a
        // local process.
        let transport: &dyn Transport = self.opts.transport.as_deref().unwrap_or(&LocalProcess);
        let result = transport.run(&call).await;
        let result = result.map_err(|e| StartFailure {
            errno: e.source.raw_os_error(),
            go_error: format!(
                "fork/exec {}: {}",
                self.executable.display(),
                exec_failure::go_errno_text(&e.source)
            ),
            explanation: exec_failure::start_failure(&self.program, &e.source),
        });
        PluginRun {
            executable: self.executable.clone(),
            operation: op.to_string(),
            env: call.env,
            cwd: call.cwd,
            refused: call.refuse,
            timeout,
            result,
            started_at,
        }
    }

    /// What one call of `op` runs, exactly as Nomad runs it (argv `[path,
    /// op]`, `env` plus any extra variables, the limit for `op`) with this
    /// plugin's options: the one place a call is described.
    fn call(&self, op: &str, mut env: Vec<(String, String)>, timeout: Duration) -> Call {
        let opts = &self.opts;
        env.extend(opts.extra_env.iter().cloned());
        let mut call = Call::new(&self.program)
            .arg0(&self.executable)
            .arg(op)
            .env(env)
            .timeout(timeout)
            .kill_mode(opts.kill_mode.unwrap_or_default())
            .output_cap(self.output_cap)
            .stdout_cap(self.output_cap.max(DECODE_LIMIT))
            .follow(opts.follow)
            .refuse(opts.refuse)
            .at_changes(opts.at_changes.clone())
            .supervised_by(&self.supervisor);
        if let Some(dir) = &opts.cwd {
            call = call.current_dir(dir);
        }
        call
    }

    /// A judged call, cut to the output cap (so that a run's record of
    /// hundreds of calls stays small whatever they print), then recorded.
    fn keep(&self, mut run: PluginRun) -> PluginRun {
        if let Ok(o) = &mut run.result {
            if o.stdout.len() > self.output_cap {
                o.stdout.truncate(self.output_cap);
                o.stdout.shrink_to_fit();
                o.stdout_truncated = true;
            }
        }
        if let Some(rec) = &self.opts.recorder {
            rec.push(&run);
        }
        run
    }

    /// Go's `%q` of the id, as Nomad's messages have it.
    fn quoted_id(&self) -> String {
        contract::go_quote_bytes(self.raw_id.as_bytes())
    }

    /// The error for an answer past [`DECODE_LIMIT`]: too large to judge.
    fn too_large(&self, op: Operation, len: u64) -> PluginError {
        PluginError::OutputTooLarge {
            message: format!(
                "output too large to judge: the {op} of plugin {} printed {len} bytes on stdout; \
                 dhv-conform decodes at most {DECODE_LIMIT} bytes (Nomad reads all of it)",
                self.quoted_id()
            ),
            bytes: len,
        }
    }

    /// Fingerprints, keeping the raw call alongside the verdict.
    pub async fn fingerprint_run(&self) -> (PluginRun, Result<Fingerprint, PluginError>) {
        let op = Operation::Fingerprint;
        let run = self
            .execute(
                op.as_str(),
                contract::fingerprint_env(),
                self.opts.timeouts.limit(op),
            )
            .await;
        let verdict = self.judge_fingerprint(&run);
        (self.keep(run), verdict)
    }

    fn judge_fingerprint(&self, run: &PluginRun) -> Result<Fingerprint, PluginError> {
        if let (true, Some(len)) = (run.succeeded(), run.stdout_too_large()) {
            return Err(self.too_large(Operation::Fingerprint, len));
        }
        if !run.succeeded() {
            return Err(self.call_error(run, Operation::Fingerprint, |exit, _| {
                contract::fingerprint_error_text(self.raw_id.as_bytes(), exit)
            }));
        }
        let resp = super::decode_fingerprint(run.stdout()).map_err(|e| PluginError::Response {
            message: contract::fingerprint_decode_error_text(&e.to_string()),
        })?;
        let Some(raw) = resp.version else {
            return Err(PluginError::Response {
                message: format!(
                    "plugin {} returned no version (a nil version crashes a Nomad agent)",
                    self.quoted_id()
                ),
            });
        };
        let info = VersionInfo::from_raw(&raw);
        if info.canonical.is_none() {
            let why = crate::version::parse(&raw)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            return Err(PluginError::Response {
                message: contract::fingerprint_decode_error_text(&why),
            });
        }
        Ok(Fingerprint { version: info })
    }

    /// Creates, keeping the raw call alongside the verdict.
    pub async fn create_run(
        &self,
        req: &CreateRequest,
    ) -> (PluginRun, Result<CreateResponse, PluginError>) {
        let op = Operation::Create;
        let run = self
            .execute(op.as_str(), req.env(), self.opts.timeouts.limit(op))
            .await;
        let verdict = if let (true, Some(len)) = (run.succeeded(), run.stdout_too_large()) {
            Err(self.too_large(op, len))
        } else if run.succeeded() {
            // Nomad returns Go's bare json error here.
            contract::decode_create(run.stdout()).map_err(|e| PluginError::Response {
                message: e.to_string(),
            })
        } else {
            Err(self.call_error(&run, Operation::Create, |exit, text| {
                contract::create_error_text(&req.volume_id, self.raw_id.as_bytes(), exit, text)
            }))
        };
        (self.keep(run), verdict)
    }

    /// Deletes, keeping the raw call alongside the verdict.
    pub async fn delete_run(&self, req: &DeleteRequest) -> (PluginRun, Result<(), PluginError>) {
        let op = Operation::Delete;
        let run = self
            .execute(op.as_str(), req.env(), self.opts.timeouts.limit(op))
            .await;
        let verdict = if run.succeeded() {
            Ok(())
        } else {
            Err(self.call_error(&run, Operation::Delete, |exit, text| {
                contract::delete_error_text(&req.volume_id, self.raw_id.as_bytes(), exit, text)
            }))
        };
        (self.keep(run), verdict)
    }

    /// The error for a call that did not succeed. `text` builds Nomad's message
    /// from Go's exit error and the plugin's `{"error"}` text, if any.
    fn call_error(
        &self,
        run: &PluginRun,
        op: Operation,
        text: impl Fn(&str, Option<&str>) -> String,
    ) -> PluginError {
        match &run.result {
            Err(start) if start.errno == Some(libc::E2BIG) => PluginError::InputTooLarge {
                message: text(&start.go_error, None),
            },
            Err(start) => PluginError::Start {
                message: text(&start.go_error, None),
                explanation: start.explanation.clone(),
            },
            Ok(outcome) => {
                let error_json = contract::decode_failure_error(op, &outcome.stdout);
                PluginError::Failed {
                    message: text(&run.exit_error(), error_json.as_deref()),
                    exit: outcome.exit,
                    timed_out: outcome.timed_out,
                }
            }
        }
    }
}

impl HostVolumePlugin for ExternalPlugin {
    fn id(&self) -> &str {
        &self.id
    }

    fn plugin_dir(&self) -> Option<&Path> {
        Some(&self.plugin_dir)
    }

    fn fingerprint(&self) -> BoxFuture<'_, PluginCall<Fingerprint>> {
        Box::pin(async move {
            let (run, result) = self.fingerprint_run().await;
            PluginCall::from_run(Operation::Fingerprint, run, result)
        })
    }

    fn create<'a>(&'a self, req: &'a CreateRequest) -> BoxFuture<'a, PluginCall<CreateResponse>> {
        Box::pin(async move {
            let (run, result) = self.create_run(req).await;
            PluginCall::from_run(Operation::Create, run, result)
        })
    }

    fn delete<'a>(&'a self, req: &'a DeleteRequest) -> BoxFuture<'a, PluginCall<()>> {
        Box::pin(async move {
            let (run, result) = self.delete_run(req).await;
            PluginCall::from_run(Operation::Delete, run, result)
        })
    }

    fn run_unknown<'a>(
        &'a self,
        op: &'a str,
        env: Vec<(String, String)>,
    ) -> BoxFuture<'a, Option<PluginRun>> {
        Box::pin(async move { Some(self.run(op, env).await) })
    }
}
