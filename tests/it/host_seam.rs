//! The run's one host seam: a host given to the engine (`SuiteOptions::host`)
//! is the one every plugin call runs through and the one a check looks at
//! the machine through. A double that wraps this machine's host counts what
//! it is asked; one that lies about a path changes the verdict of the check
//! that looks at it, which it could not if the check read the disk itself.

use std::collections::{BTreeSet, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use dhv_conform::conformance::host::{
    DirList, Held, HoldTarget, Host, LocalHost, LoopDevice, Mount, MountFill, PathInfo, Space,
    Transport, Unmounted,
};
use dhv_conform::conformance::{
    InFlight, Progress, ProgressEvent, Settings, SuiteOptions, Target, run_suite,
};
use dhv_conform::plugin::BoxFuture;
use dhv_conform::plugin::transport::LocalProcess;
use dhv_conform::report::Status;
use dhv_host::exec::{Call, Outcome, SpawnError};
use libtest_mimic::Arguments;

/// Runs every launch as a local process, keeping its operation and
/// environment (`K=V`, as a report lists them), and what the run's progress
/// handle said the check has in flight as the launch started.
#[derive(Debug, Default)]
struct CountingTransport {
    launches: Mutex<Vec<(String, Vec<String>)>>,
    in_flight: OnceLock<InFlight>,
    described: Mutex<Vec<(Vec<String>, Option<String>)>>,
}

impl Transport for CountingTransport {
    fn run<'a>(&'a self, call: &'a Call) -> BoxFuture<'a, Result<Outcome, SpawnError>> {
        let op = call
            .args
            .first()
            .map(|a| a.to_string_lossy().into_owned())
            .unwrap_or_default();
        let env: Vec<String> = call.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if let Some(f) = self.in_flight.get() {
            self.described
                .lock()
                .unwrap()
                .push((env.clone(), f.describe(CHECK)));
        }
        self.launches.lock().unwrap().push((op, env));
        LocalProcess.run(call)
    }
}

/// This machine, every path looked at kept; `exists` lies (says yes) for
/// paths that contain `lie_under`, when set.
#[derive(Debug)]
struct Watching {
    local: LocalHost,
    transport: Arc<CountingTransport>,
    transports_handed: AtomicUsize,
    looked_at: Mutex<Vec<PathBuf>>,
    lie_under: Option<&'static str>,
}

impl Watching {
    fn new(lie_under: Option<&'static str>) -> Watching {
        Watching {
            local: LocalHost::new(),
            transport: Arc::default(),
            transports_handed: AtomicUsize::new(0),
            looked_at: Mutex::default(),
            lie_under,
        }
    }

    fn saw(&self, path: &Path) {
        self.looked_at.lock().unwrap().push(path.to_path_buf());
    }
}

impl Host for Watching {
    fn transport(&self) -> Arc<dyn Transport> {
        self.transports_handed.fetch_add(1, Ordering::SeqCst);
        self.transport.clone()
    }
    fn privileged(&self) -> bool {
        self.local.privileged()
    }
    fn can_refuse(&self) -> bool {
        self.local.can_refuse()
    }
    fn can_hold_changes(&self) -> bool {
        self.local.can_hold_changes()
    }
    fn entry(&self, path: &Path) -> std::io::Result<PathInfo> {
        self.saw(path);
        self.local.entry(path)
    }
    fn entry_followed(&self, path: &Path) -> std::io::Result<PathInfo> {
        self.saw(path);
        self.local.entry_followed(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.saw(path);
        let lie = self
            .lie_under
            .is_some_and(|l| path.iter().any(|c| c == std::ffi::OsStr::new(l)));
        lie || self.local.exists(path)
    }
    fn link_target(&self, path: &Path) -> std::io::Result<PathBuf> {
        self.saw(path);
        self.local.link_target(path)
    }
    fn canonical(&self, path: &Path) -> std::io::Result<PathBuf> {
        self.saw(path);
        self.local.canonical(path)
    }
    fn list_dir(&self, path: &Path) -> std::io::Result<DirList> {
        self.saw(path);
        self.local.list_dir(path)
    }
    fn dir_names(&self, dir: &Path, cap: usize) -> std::io::Result<Vec<OsString>> {
        self.saw(dir);
        self.local.dir_names(dir, cap)
    }
    fn walk(&self, dir: &Path, cap: usize) -> BTreeSet<String> {
        self.saw(dir);
        self.local.walk(dir, cap)
    }
    fn read_small(&self, path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
        self.saw(path);
        self.local.read_small(path, limit)
    }
    fn space(&self, path: &Path) -> std::io::Result<Space> {
        self.saw(path);
        self.local.space(path)
    }
    fn set_mode(&self, path: &Path, mode: u32) -> std::io::Result<()> {
        self.local.set_mode(path, mode)
    }
    fn hold(&self, what: HoldTarget) -> std::io::Result<Held> {
        self.local.hold(what)
    }
    fn is_block_device(&self, path: &Path) -> bool {
        self.saw(path);
        self.local.is_block_device(path)
    }
    fn block_device_size(&self, path: &Path) -> std::io::Result<u64> {
        self.local.block_device_size(path)
    }
    fn has_marker(&self, path: &Path, bytes: &[u8]) -> bool {
        self.local.has_marker(path, bytes)
    }
    fn loop_backing(&self, path: &Path) -> Option<PathBuf> {
        self.saw(path);
        self.local.loop_backing(path)
    }
    fn loops_backed_under(&self, dir: &Path) -> Vec<LoopDevice> {
        self.local.loops_backed_under(dir)
    }
    fn sized_loops_backed_under(&self, dir: &Path) -> Vec<LoopDevice> {
        self.local.sized_loops_backed_under(dir)
    }
    fn loop_attached(&self, dev: &LoopDevice) -> bool {
        self.local.loop_attached(dev)
    }
    fn loop_detach_deferred(&self, path: &Path) -> bool {
        self.local.loop_detach_deferred(path)
    }
    fn attach_loop(&self, image: &Path, root: &Path) -> std::io::Result<LoopDevice> {
        self.local.attach_loop(image, root)
    }
    fn detach_loop(&self, dev: &LoopDevice, bound: Duration) -> std::io::Result<()> {
        self.local.detach_loop(dev, bound)
    }
    fn mounts(&self) -> std::io::Result<Vec<Mount>> {
        self.local.mounts()
    }
    fn mounts_under(&self, dir: &Path) -> std::io::Result<Vec<Mount>> {
        self.local.mounts_under(dir)
    }
    fn unmount_under(&self, dir: &Path) -> std::io::Result<Unmounted> {
        self.local.unmount_under(dir)
    }
    fn fill_mount_table(&self, dir: &Path, count: usize) -> std::io::Result<Box<dyn MountFill>> {
        self.local.fill_mount_table(dir, count)
    }
    fn fill(&self, file: std::fs::File, bytes: u64) -> std::io::Result<()> {
        self.local.fill(file, bytes)
    }
    fn device_round_trip(&self, path: &Path, size: u64, write: bool) -> std::io::Result<String> {
        self.local.device_round_trip(path, size, write)
    }
}

const CHECK: &str = "delete.removes";

fn options(host: Arc<Watching>) -> SuiteOptions {
    let transport = host.transport.clone();
    let reference = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sample-plugins/reference");
    let libtest = Arguments {
        quiet: true,
        filter: Some(CHECK.into()),
        exact: true,
        test_threads: Some(2),
        logfile: Some("/dev/null".into()),
        ..Arguments::default()
    };
    let mut opts = SuiteOptions::new(Settings::new(Target::Executable(reference)), libtest);
    opts.progress = Progress::new(move |e| {
        if let ProgressEvent::Run(f) = e {
            let _ = transport.in_flight.set(f);
        }
    });
    opts.host = Some(host);
    opts
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn every_plugin_call_and_every_look_of_a_run_go_through_the_host_it_was_given() {
    let host = Arc::new(Watching::new(None));
    let outcome = run_suite(&runtime(), options(host.clone())).expect("the suite ran");
    let check = outcome
        .report
        .checks
        .iter()
        .find(|c| c.id == CHECK)
        .expect("the check ran");
    assert_eq!(check.status, Status::Pass, "{check:?}");

    // Every plugin call the run made (each check's and each probe's) went
    // through the double's transport: as many launches, and each call a
    // report lists is one of them.
    let launches = host.transport.launches.lock().unwrap().clone();
    assert!(host.transports_handed.load(Ordering::SeqCst) > 0);
    assert!(
        launches.len() >= outcome.plugin_calls && outcome.plugin_calls > 0,
        "{} launches through the host, {} plugin calls",
        launches.len(),
        outcome.plugin_calls
    );
    let launched: HashSet<(String, Vec<String>)> = launches.into_iter().collect();
    for inv in &check.invocations {
        assert!(
            launched.contains(&(inv.operation.clone(), inv.env.clone())),
            "not through the host: {} {:?}",
            inv.operation,
            inv.env
        );
    }

    // The check looked at its volume through the host, not the disk.
    let sandbox = outcome.teardown.temp_dir.join(CHECK).join("volumes");

    // Each of the check's calls, as it started, was known as the check's
    // (the owner its handle carries), never as a shared call of another.
    let own_dir = format!("DHV_VOLUMES_DIR={}", sandbox.display());
    let described = host.transport.described.lock().unwrap();
    let own: Vec<_> = described
        .iter()
        .filter(|(env, _)| env.iter().any(|kv| kv.starts_with(&own_dir)))
        .collect();
    assert!(!own.is_empty(), "no call of the check seen: {described:?}");
    for (_, said) in &own {
        assert!(
            said.as_deref()
                .is_some_and(|s| !s.starts_with("waiting on a shared call")),
            "{said:?}"
        );
    }
    let looked = host.looked_at.lock().unwrap();
    assert!(
        looked
            .iter()
            .any(|p| p.starts_with(&sandbox) && p != &sandbox),
        "nothing below {} was looked at through the host: {looked:?}",
        sandbox.display()
    );
    assert!(outcome.teardown.removed, "{:?}", outcome.teardown);
}

#[test]
fn a_host_that_says_the_deleted_volume_is_still_there_is_believed() {
    // Only the check's own sandbox is lied about: its volume "still exists".
    let host = Arc::new(Watching::new(Some(CHECK)));
    let outcome = run_suite(&runtime(), options(host)).expect("the suite ran");
    let check = outcome
        .report
        .checks
        .iter()
        .find(|c| c.id == CHECK)
        .expect("the check ran");
    assert_eq!(check.status, Status::Fail, "{check:?}");
    assert!(
        check.message.contains("it still exists"),
        "{}",
        check.message
    );
    assert!(outcome.teardown.removed, "{:?}", outcome.teardown);
}
