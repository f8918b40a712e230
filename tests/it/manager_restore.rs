//! Restore through the library API: every volume back after a reboot, a missing
//! plugin failing only its own volumes, bounded concurrency; and configured
//! plugin instances, used before the plugin dir.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::util::manager::{ID1, ID2, ID3, ID4, ID5, logging_script, rt};
use crate::util::{Node, Scratch};
use dhv_conform::contract::{CreateRequest, CreateResponse, DeleteRequest, Operation};
use dhv_conform::manager::{RegisterSpec, VolumeSpec};
use dhv_conform::plugin::{
    BoxFuture, ExternalPlugin, Fingerprint, HostVolumePlugin, PluginCall, Recorder,
};
use dhv_conform::report::VersionInfo;

// ---------------------------------------------------------------- restore

#[test]
fn restore_after_a_reboot_creates_every_volume_again() {
    let node = Node::new();
    node.logging_plugin("logger");
    let m = node.manager();
    let rt = rt();
    let a = rt
        .block_on(m.create(VolumeSpec::new("mkdir", "a").with_id(ID1)))
        .unwrap();
    let b = rt
        .block_on(m.create(VolumeSpec::new("logger", "b").with_id(ID2)))
        .unwrap();
    let reg = node.work.path().join("registered");
    fs::create_dir(&reg).unwrap();
    rt.block_on(m.register(RegisterSpec::new("c", &reg).with_id(ID3)))
        .unwrap();
    // The reboot: volume dirs are gone (a tmpfs, say), the state is not.
    fs::remove_dir_all(&a.host_path).unwrap();
    fs::remove_dir_all(&b.host_path).unwrap();

    let m = node.manager();
    let results = rt.block_on(m.restore()).unwrap();
    let got: BTreeMap<_, _> = results
        .iter()
        .map(|r| (r.volume.id.as_str(), r.path().map(String::from)))
        .collect();
    assert_eq!(got[ID1].as_deref(), Some(a.host_path.as_str()));
    assert_eq!(got[ID2].as_deref(), Some(b.host_path.as_str()));
    assert_eq!(got[ID3].as_deref(), Some(reg.to_str().unwrap()));
    assert!(Path::new(&a.host_path).is_dir() && Path::new(&b.host_path).is_dir());
    assert_eq!(node.calls().last().unwrap(), &format!("create {ID2} b 0"));
}

#[test]
fn restore_with_a_missing_plugin_restores_the_rest() {
    let node = Node::new();
    node.logging_plugin("stays");
    let goes = node.logging_plugin("goes");
    let m = node.manager();
    let rt = rt();
    rt.block_on(m.create(VolumeSpec::new("stays", "a").with_id(ID1)))
        .unwrap();
    rt.block_on(m.create(VolumeSpec::new("goes", "b").with_id(ID2)))
        .unwrap();
    // Two more, so that each plugin has several volumes: the plugin is looked
    // up once per restore, and its answer must hold for every volume.
    rt.block_on(m.create(VolumeSpec::new("stays", "d").with_id(ID4)))
        .unwrap();
    rt.block_on(m.create(VolumeSpec::new("goes", "e").with_id(ID5)))
        .unwrap();
    let reg = node.work.path().join("registered");
    fs::create_dir(&reg).unwrap();
    rt.block_on(m.register(RegisterSpec::new("c", &reg).with_id(ID3)))
        .unwrap();
    fs::remove_file(goes).unwrap();
    fs::remove_dir(&reg).unwrap();

    let results = rt.block_on(node.manager().restore()).unwrap();
    assert_eq!(results.len(), 5);
    let by_id: BTreeMap<_, _> = results.iter().map(|r| (r.volume.id.as_str(), r)).collect();
    assert!(by_id[ID1].is_ok() && by_id[ID4].is_ok());
    for id in [ID2, ID5] {
        assert_eq!(
            by_id[id].error().unwrap().to_string(),
            "no such plugin: \"goes\""
        );
    }
    assert!(
        by_id[ID3]
            .error()
            .unwrap()
            .to_string()
            .starts_with("could not verify host path for \"c\": stat "),
    );
    // A failed restore forgets nothing.
    assert_eq!(rt.block_on(node.manager().list()).unwrap().len(), 5);
}

/// Counts how many creates run at once. With a barrier of `n`, each call waits
/// for `n - 1` others: the calls can only finish if `n` really run together.
#[derive(Debug, Default)]
struct CountingPlugin {
    now: AtomicUsize,
    max: AtomicUsize,
    barrier: Option<tokio::sync::Barrier>,
    /// A create for a volume of this name panics (a bug of ours).
    panic_on: Option<&'static str>,
}

/// The test plugins' fingerprint: version 2.0.
fn version_2_0() -> BoxFuture<'static, PluginCall<Fingerprint>> {
    Box::pin(PluginCall::timed(
        Operation::Fingerprint,
        Vec::new(),
        async {
            Ok(Fingerprint {
                version: VersionInfo::from_raw("2.0"),
            })
        },
    ))
}

/// The test plugins' delete: done at once.
fn deleted(req: &DeleteRequest) -> BoxFuture<'_, PluginCall<()>> {
    Box::pin(PluginCall::timed(Operation::Delete, req.env(), async {
        Ok(())
    }))
}

impl HostVolumePlugin for CountingPlugin {
    fn id(&self) -> &str {
        "counting"
    }

    fn fingerprint(&self) -> BoxFuture<'_, PluginCall<Fingerprint>> {
        version_2_0()
    }

    fn create<'a>(&'a self, req: &'a CreateRequest) -> BoxFuture<'a, PluginCall<CreateResponse>> {
        Box::pin(PluginCall::timed(
            Operation::Create,
            req.env(),
            async move {
                if self.panic_on == Some(req.volume_name.as_str()) {
                    panic!("a bug in the create of {}", req.volume_name);
                }
                let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
                self.max.fetch_max(now, Ordering::SeqCst);
                if let Some(b) = &self.barrier {
                    b.wait().await;
                }
                self.now.fetch_sub(1, Ordering::SeqCst);
                Ok(CreateResponse {
                    path: format!("{}/{}", req.volumes_dir, req.volume_id),
                    bytes: 0,
                    error: String::new(),
                })
            },
        ))
    }

    fn delete<'a>(&'a self, req: &'a DeleteRequest) -> BoxFuture<'a, PluginCall<()>> {
        deleted(req)
    }
}

/// Volumes `v0` to `v{n-1}` of the counting plugin, created on `node`.
fn created_counting_volumes(node: &Node, rt: &tokio::runtime::Runtime, n: usize) {
    let m = node
        .manager()
        .with_plugin(Arc::new(CountingPlugin::default()));
    for i in 0..n {
        rt.block_on(m.create(VolumeSpec::new("counting", format!("v{i}"))))
            .unwrap();
    }
}

#[test]
fn restore_runs_a_bounded_number_of_calls_at_once() {
    let node = Node::new();
    let rt = rt();
    created_counting_volumes(&node, &rt, 21);
    let plugin = Arc::new(CountingPlugin {
        barrier: Some(tokio::sync::Barrier::new(3)),
        ..CountingPlugin::default()
    });
    let m = node
        .manager()
        .with_plugin(Arc::clone(&plugin) as Arc<dyn HostVolumePlugin>)
        .with_restore_concurrency(3);
    // Fewer than 3 at once would never pass the barrier: bound the wait.
    let results = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(20), m.restore()).await })
        .expect("3 calls ran together")
        .unwrap();
    assert_eq!(results.len(), 21);
    assert!(results.iter().all(|r| r.is_ok()));
    assert_eq!(
        plugin.max.load(Ordering::SeqCst),
        3,
        "never more than 3 at once"
    );
}

/// A restore starts with one lane per core and adds lanes while the CPUs
/// have room: calls that wait (here for one another, as for a disk or a
/// network) leave them idle, so the restore reaches its limit.
#[test]
fn a_restore_whose_calls_wait_grows_to_its_limit() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let limit = 2 * cores + 1;
    let node = Node::new();
    let rt = rt();
    created_counting_volumes(&node, &rt, 3 * limit);
    let plugin = Arc::new(CountingPlugin {
        barrier: Some(tokio::sync::Barrier::new(limit)),
        ..CountingPlugin::default()
    });
    let m = node
        .manager()
        .with_plugin(Arc::clone(&plugin) as Arc<dyn HostVolumePlugin>)
        .with_restore_concurrency(limit);
    // Only `limit` calls at once pass the barrier: bound the wait.
    let results = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(20), m.restore()).await })
        .unwrap_or_else(|_| panic!("{limit} calls never ran together"))
        .unwrap();
    assert_eq!(results.len(), 3 * limit);
    assert!(results.iter().all(|r| r.is_ok()));
    assert_eq!(plugin.max.load(Ordering::SeqCst), limit);
}

#[test]
fn a_panic_in_one_volumes_restore_fails_that_volume_alone() {
    let node = Node::new();
    let rt = rt();
    created_counting_volumes(&node, &rt, 6);
    // One call at a time: the volumes after the one that panics are restored
    // only if the panic took nothing else along.
    let m = node
        .manager()
        .with_plugin(Arc::new(CountingPlugin {
            panic_on: Some("v3"),
            ..CountingPlugin::default()
        }))
        .with_restore_concurrency(1);
    let results = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(20), m.restore()).await })
        .expect("the restore ended")
        .unwrap();
    assert_eq!(results.len(), 6);
    for r in &results {
        if r.volume.name == "v3" {
            let e = r
                .error()
                .expect("the volume whose create panicked failed")
                .to_string();
            assert!(e.contains("a bug in the create of v3"), "{e}");
        } else {
            assert!(r.is_ok(), "{}: {:?}", r.volume.name, r.error());
        }
    }
}

// ---------------------------------------------------------------- overrides

#[test]
fn a_configured_plugin_instance_is_used_before_the_plugin_dir() {
    let node = Node::new();
    let elsewhere = Scratch::new();
    let path = elsewhere.plugin("logger", &logging_script(&node.log(), ""));
    let recorder = Recorder::new();
    let plugin = ExternalPlugin::from_path(&path).with_recorder(recorder.clone());
    let m = node.manager().with_plugin(Arc::new(plugin));
    let rt = rt();
    let v = rt
        .block_on(m.create(VolumeSpec::new("logger", "data").with_id(ID1)))
        .unwrap();
    rt.block_on(m.delete(&v.id)).unwrap();
    let ops: Vec<_> = recorder
        .runs()
        .iter()
        .map(|r| r.operation.clone())
        .collect();
    assert_eq!(ops, ["create", "delete"]);
    let fp = rt.block_on(m.fingerprint_plugins()).unwrap();
    assert_eq!(fp.attributes["plugins.host_volume.logger.version"], "1.0.0");
}

// ---------------------------------------------------------------- dropped

/// A create that says it started, then never ends; when its future is
/// dropped (what kills an executable's call), it says so.
#[derive(Debug)]
struct HangingPlugin {
    started: std::sync::mpsc::Sender<String>,
    dropped: std::sync::mpsc::Sender<String>,
}

/// Sends its volume's name when dropped.
struct SaysWhenDropped(std::sync::mpsc::Sender<String>, String);

impl Drop for SaysWhenDropped {
    fn drop(&mut self) {
        let _ = self.0.send(std::mem::take(&mut self.1));
    }
}

impl HostVolumePlugin for HangingPlugin {
    fn id(&self) -> &str {
        "counting"
    }

    fn fingerprint(&self) -> BoxFuture<'_, PluginCall<Fingerprint>> {
        version_2_0()
    }

    fn create<'a>(&'a self, req: &'a CreateRequest) -> BoxFuture<'a, PluginCall<CreateResponse>> {
        Box::pin(PluginCall::timed(
            Operation::Create,
            req.env(),
            async move {
                let _guard = SaysWhenDropped(self.dropped.clone(), req.volume_name.clone());
                let _ = self.started.send(req.volume_name.clone());
                std::future::pending::<()>().await;
                unreachable!("a pending future never ends")
            },
        ))
    }

    fn delete<'a>(&'a self, req: &'a DeleteRequest) -> BoxFuture<'a, PluginCall<()>> {
        deleted(req)
    }
}

#[test]
fn dropping_a_restore_stops_its_lanes_and_drops_their_calls() {
    let node = Node::new();
    let rt = rt();
    created_counting_volumes(&node, &rt, 6);
    let (started_tx, started) = std::sync::mpsc::channel();
    let (dropped_tx, dropped) = std::sync::mpsc::channel();
    let m = node
        .manager()
        .with_plugin(Arc::new(HangingPlugin {
            started: started_tx,
            dropped: dropped_tx,
        }))
        .with_restore_concurrency(2);
    let bound = Duration::from_secs(20);
    let restore = rt.spawn(async move { m.restore().await.map(|r| r.len()) });
    let mut running: Vec<String> = (0..2)
        .map(|_| started.recv_timeout(bound).expect("two creates started"))
        .collect();
    restore.abort();
    assert!(
        rt.block_on(restore).is_err_and(|e| e.is_cancelled()),
        "the restore was dropped, not finished"
    );
    // Each lane drops its call in flight and stops.
    let mut gone: Vec<String> = (0..2)
        .map(|_| dropped.recv_timeout(bound).expect("both calls dropped"))
        .collect();
    running.sort();
    gone.sort();
    assert_eq!(running, gone, "the calls in flight are the ones dropped");
    // A lane that dropped its call takes no other job: none of the four
    // volumes left was started (the plugin may be gone by now, and with it
    // the sender: either way, nothing more was sent).
    let more = started.try_recv();
    assert!(more.is_err(), "a volume started after the drop: {more:?}");
}
