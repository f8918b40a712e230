//! The manager's rules, each proven through the library API with the built-in
//! plugin or a throwaway sh plugin: discovery, the name lock, updates, register,
//! delete, restore, the compensating delete, and the state file's safety.

mod util;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dhv_conform::contract::{CreateRequest, CreateResponse, DeleteRequest, Operation};
use dhv_conform::manager::{
    Cleanup, DeleteOutcome, Fingerprinter, HostVolumeManager, ManagerError, RegisterSpec,
    VolumeSpec,
};
use dhv_conform::plugin::{
    BoxFuture, ExternalPlugin, Fingerprint, HostVolumePlugin, PluginCall, Recorder, Timeouts,
};
use dhv_conform::version::VersionInfo;
use util::{Node, Scratch, processes_mentioning};

const ID1: &str = "11111111-1111-4111-8111-111111111111";
const ID2: &str = "22222222-2222-4222-8222-222222222222";
const ID3: &str = "33333333-3333-4333-8333-333333333333";
const ID4: &str = "44444444-4444-4444-8444-444444444444";
const ID5: &str = "55555555-5555-4555-8555-555555555555";

fn rt() -> tokio::runtime::Runtime {
    util::runtime()
}

impl Node {
    fn log(&self) -> PathBuf {
        self.work.path().join("calls.log")
    }

    fn manager(&self) -> HostVolumeManager {
        HostVolumeManager::open(self.state())
            .unwrap()
            .with_plugin_dir(self.plugins.path())
            .with_volumes_dir(self.volumes())
    }

    /// A well-behaved plugin that logs every create and delete (with the
    /// delete's DHV_CREATED_PATH, name and namespace), and whose delete is the
    /// naive `rm -rf "$DHV_CREATED_PATH"`.
    fn logging_plugin(&self, id: &str) -> PathBuf {
        self.plugins.plugin(id, &logging_script(&self.log(), ""))
    }

    fn calls(&self) -> Vec<String> {
        fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }
}

/// `delete_body` replaces the delete branch when not empty.
fn logging_script(log: &Path, delete_body: &str) -> String {
    let delete = if delete_body.is_empty() {
        r#"rm -rf "$DHV_CREATED_PATH""#
    } else {
        delete_body
    };
    format!(
        r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
LOG='{log}'
case "$1" in
fingerprint) echo '{{"version": "1.0.0"}}' ;;
create)
  printf 'create %s %s %s\n' "$DHV_VOLUME_ID" "$DHV_VOLUME_NAME" "$DHV_CAPACITY_MAX_BYTES" >> "$LOG"
  mkdir -p "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID" || exit 1
  printf '{{"path": "%s", "bytes": 7}}\n' "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID" ;;
delete)
  printf 'delete %s|%s|%s|%s\n' "$DHV_VOLUME_ID" "$DHV_CREATED_PATH" "$DHV_VOLUME_NAME" "$DHV_NAMESPACE" >> "$LOG"
  {delete} ;;
esac
"#,
        log = log.display()
    )
}

fn stored_request(node: &Node, id: &str) -> CreateRequest {
    let m = node.manager();
    rt().block_on(m.get(id))
        .unwrap()
        .unwrap()
        .create_request
        .unwrap()
}

// ---------------------------------------------------------------- create

#[test]
fn same_name_with_another_id_fails_with_nomads_text() {
    let node = Node::new();
    let m = node.manager();
    let rt = rt();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "data").with_id(ID1)))
        .unwrap();
    let err = rt
        .block_on(m.create(VolumeSpec::new("mkdir", "data").with_id(ID2)))
        .unwrap_err();
    assert_eq!(err.to_string(), "volume name already exists on this node");
    assert!(matches!(&err, ManagerError::NameConflict { existing_id, .. } if existing_id == ID1));
    assert!(
        !node.volumes().join(ID2).exists(),
        "no plugin ran for the loser"
    );
    // The name is held whatever the namespace, as in Nomad.
    let err = rt
        .block_on(
            m.create(
                VolumeSpec::new("mkdir", "data")
                    .with_id(ID2)
                    .with_namespace("other"),
            ),
        )
        .unwrap_err();
    assert!(matches!(err, ManagerError::NameConflict { .. }));
    // A register is held to the same lock.
    let err = rt
        .block_on(m.register(RegisterSpec::new("data", node.volumes()).with_id(ID2)))
        .unwrap_err();
    assert_eq!(err.to_string(), "volume name already exists on this node");
    let names: Vec<_> = rt
        .block_on(m.list())
        .unwrap()
        .into_iter()
        .map(|v| v.id)
        .collect();
    assert_eq!(names, [ID1]);
}

#[test]
fn the_name_is_free_again_after_delete_and_after_a_failed_first_create() {
    let node = Node::new();
    node.plugins.plugin(
        "fails",
        "#!/bin/sh\necho '{\"error\": \"no space\"}'\nexit 1\n",
    );
    let m = node.manager();
    let rt = rt();
    let err = rt
        .block_on(m.create(VolumeSpec::new("fails", "data").with_id(ID1)))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("error creating volume \"{ID1}\" with plugin \"fails\": exit status 1: no space")
    );
    rt.block_on(m.create(VolumeSpec::new("mkdir", "data").with_id(ID2)))
        .unwrap();
    rt.block_on(m.delete(ID2)).unwrap();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "data").with_id(ID3)))
        .unwrap();
}

#[test]
fn the_same_id_again_is_an_update_that_stores_the_new_request() {
    let node = Node::new();
    node.logging_plugin("logger");
    let m = node.manager();
    let rt = rt();
    let first = rt
        .block_on(
            m.create(
                VolumeSpec::new("logger", "data")
                    .with_id(ID1)
                    .with_capacity(0, 100),
            ),
        )
        .unwrap();
    fs::write(Path::new(&first.host_path).join("keep"), "x").unwrap();
    let second = rt
        .block_on(
            m.create(
                VolumeSpec::new("logger", "data")
                    .with_id(ID1)
                    .with_capacity(0, 200),
            ),
        )
        .unwrap();
    assert_eq!(second.host_path, first.host_path);
    assert_eq!(second.bytes, 7);
    assert!(Path::new(&first.host_path).join("keep").exists());
    assert_eq!(
        node.calls(),
        [
            format!("create {ID1} data 100"),
            format!("create {ID1} data 200")
        ]
    );
    assert_eq!(stored_request(&node, ID1).capacity_max_bytes, 200);
    assert_eq!(rt.block_on(m.list()).unwrap().len(), 1);
}

#[test]
fn an_update_may_rename_a_volume_and_frees_the_old_name() {
    let node = Node::new();
    let m = node.manager();
    let rt = rt();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "old").with_id(ID1)))
        .unwrap();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "taken").with_id(ID2)))
        .unwrap();
    let err = rt
        .block_on(m.create(VolumeSpec::new("mkdir", "taken").with_id(ID1)))
        .unwrap_err();
    assert!(matches!(err, ManagerError::NameConflict { .. }), "{err}");
    rt.block_on(m.create(VolumeSpec::new("mkdir", "new").with_id(ID1)))
        .unwrap();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "old").with_id(ID3)))
        .unwrap();
    let names: Vec<_> = rt
        .block_on(m.list())
        .unwrap()
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(names, ["new", "old", "taken"]);
}

#[test]
fn a_failed_update_keeps_the_volume_and_its_name() {
    let node = Node::new();
    node.plugins.plugin(
        "flaky",
        r#"#!/bin/sh
PATH=/usr/bin:/bin
case "$1" in
fingerprint) echo '{"version": "1"}' ;;
create)
  [ "$DHV_CAPACITY_MAX_BYTES" = 0 ] || exit 3
  mkdir -p "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
  echo "{\"path\": \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"}" ;;
esac
"#,
    );
    let m = node.manager();
    let rt = rt();
    rt.block_on(m.create(VolumeSpec::new("flaky", "data").with_id(ID1)))
        .unwrap();
    let err = rt
        .block_on(
            m.create(
                VolumeSpec::new("flaky", "data")
                    .with_id(ID1)
                    .with_capacity(0, 5),
            ),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("error creating volume \"{ID1}\" with plugin \"flaky\": exit status 3")
    );
    // Nomad releases the name here; we keep it, since the volume still exists.
    let err = rt
        .block_on(m.create(VolumeSpec::new("mkdir", "data").with_id(ID2)))
        .unwrap_err();
    assert!(matches!(err, ManagerError::NameConflict { .. }));
    assert_eq!(stored_request(&node, ID1).capacity_max_bytes, 0);
}

#[test]
fn an_update_cannot_switch_plugins_or_turn_a_registration_into_a_creation() {
    let node = Node::new();
    node.logging_plugin("logger");
    let m = node.manager();
    let rt = rt();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "a").with_id(ID1)))
        .unwrap();
    let err = rt
        .block_on(m.create(VolumeSpec::new("logger", "a").with_id(ID1)))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("volume \"{ID1}\" was created by plugin \"mkdir\", not \"logger\"")
    );
    rt.block_on(m.register(RegisterSpec::new("b", node.volumes()).with_id(ID2)))
        .unwrap();
    let err = rt
        .block_on(m.create(VolumeSpec::new("mkdir", "b").with_id(ID2)))
        .unwrap_err();
    assert!(matches!(err, ManagerError::NotCreated { .. }), "{err}");
    let err = rt
        .block_on(m.register(RegisterSpec::new("a", node.volumes()).with_id(ID1)))
        .unwrap_err();
    assert!(matches!(err, ManagerError::NotRegistered { .. }), "{err}");
    assert!(node.calls().is_empty());
}

#[test]
fn bad_ids_and_a_missing_volumes_dir_are_input_errors() {
    let node = Node::new();
    let rt = rt();
    let m = node.manager();
    for id in [
        "",
        "not-a-uuid",
        "11111111-1111-4111-8111-11111111111G",
        "AAAAAAAA-AAAA-4AAA-8AAA-AAAAAAAAAAAA",
    ] {
        let err = rt
            .block_on(m.create(VolumeSpec::new("mkdir", "x").with_id(id)))
            .unwrap_err();
        assert!(
            matches!(err, ManagerError::InvalidVolumeId { .. }) && err.is_input_error(),
            "{id}"
        );
        assert!(rt.block_on(m.delete(id)).unwrap_err().is_input_error());
    }
    let bare = HostVolumeManager::open(node.state()).unwrap();
    let err = rt
        .block_on(bare.create(VolumeSpec::new("mkdir", "x")))
        .unwrap_err();
    assert!(matches!(err, ManagerError::NoVolumesDir { .. }) && err.is_input_error());
}

#[test]
fn lookup_is_confined_to_the_plugin_dir() {
    let node = Node::new();
    let outside = Scratch::new();
    let target = outside.plugin("outside", &logging_script(&node.log(), ""));
    std::os::unix::fs::symlink(&target, node.plugins.path().join("escape")).unwrap();
    node.plugins.plugin("plain", "#!/bin/sh\nexit 0\n");
    fs::set_permissions(
        node.plugins.path().join("plain"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let m = node.manager();
    let rt = rt();
    let relative = format!(
        "../{}/outside",
        outside.path().file_name().unwrap().to_string_lossy()
    );
    let absolute = target.to_string_lossy().into_owned();
    for id in [
        relative.as_str(),
        absolute.as_str(),
        "escape",
        "missing",
        ".",
        "..",
    ] {
        let err = rt.block_on(m.create(VolumeSpec::new(id, "v"))).unwrap_err();
        assert_eq!(err.to_string(), format!("no such plugin: {id:?}"));
    }
    let err = rt
        .block_on(m.create(VolumeSpec::new("plain", "v")))
        .unwrap_err();
    assert_eq!(err.to_string(), "plugin not executable: \"plain\"");
    assert!(node.calls().is_empty(), "nothing outside the dir ran");
    // Without a plugin dir only the built-in exists.
    let bare = HostVolumeManager::open(node.state())
        .unwrap()
        .with_volumes_dir(node.volumes());
    let err = rt
        .block_on(bare.create(VolumeSpec::new("plain", "v")))
        .unwrap_err();
    assert_eq!(err.to_string(), "no such plugin: \"plain\"");
}

#[test]
fn the_plugin_is_looked_up_on_every_call() {
    let node = Node::new();
    let m = node.manager();
    let rt = rt();
    let err = rt
        .block_on(m.create(VolumeSpec::new("late", "v")))
        .unwrap_err();
    assert_eq!(err.to_string(), "no such plugin: \"late\"");
    node.logging_plugin("late");
    rt.block_on(m.create(VolumeSpec::new("late", "v"))).unwrap();
}

// ---------------------------------------------------------------- compensating delete

/// Makes every later state write fail: the lock file cannot be opened.
fn break_state_writes(node: &Node) {
    let lock = node.state().join("state.lock");
    let _ = fs::remove_file(&lock);
    fs::create_dir(&lock).unwrap();
}

#[test]
fn a_first_create_that_cannot_be_saved_is_deleted_at_its_own_path() {
    let node = Node::new();
    node.logging_plugin("logger");
    let m = node.manager();
    let rt = rt();
    let other = rt
        .block_on(m.create(VolumeSpec::new("logger", "other").with_id(ID2)))
        .unwrap();
    fs::write(Path::new(&other.host_path).join("data"), "precious").unwrap();
    break_state_writes(&node);

    let err = rt
        .block_on(
            m.create(
                VolumeSpec::new("logger", "new")
                    .with_id(ID1)
                    .with_namespace("prod"),
            ),
        )
        .unwrap_err();
    let ManagerError::NotSaved { cleanup, .. } = &err else {
        panic!("{err}");
    };
    assert!(matches!(cleanup, Cleanup::Deleted), "{err}");
    assert!(
        err.to_string().contains("the plugin deleted it again"),
        "{err}"
    );
    let own_path = node.volumes().join(ID1);
    // Nomad would send the volumes dir, with an empty name and namespace.
    assert_eq!(
        node.calls().last().unwrap(),
        &format!("delete {ID1}|{}|new|prod", own_path.display())
    );
    assert!(!own_path.exists());
    assert!(
        node.volumes().is_dir(),
        "the volumes dir survives a naive plugin"
    );
    assert_eq!(
        fs::read_to_string(Path::new(&other.host_path).join("data")).unwrap(),
        "precious"
    );
    // The name was released.
    fs::remove_dir(node.state().join("state.lock")).unwrap();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "new").with_id(ID3)))
        .unwrap();
}

#[test]
fn an_update_that_cannot_be_saved_is_left_in_place() {
    let node = Node::new();
    node.logging_plugin("logger");
    let m = node.manager();
    let rt = rt();
    let v = rt
        .block_on(m.create(VolumeSpec::new("logger", "data").with_id(ID1)))
        .unwrap();
    break_state_writes(&node);
    let err = rt
        .block_on(
            m.create(
                VolumeSpec::new("logger", "data")
                    .with_id(ID1)
                    .with_capacity(0, 9),
            ),
        )
        .unwrap_err();
    assert!(
        matches!(
            &err,
            ManagerError::NotSaved {
                cleanup: Cleanup::KeptExisting,
                ..
            }
        ),
        "{err}"
    );
    assert!(Path::new(&v.host_path).is_dir());
    assert!(node.calls().iter().all(|c| c.starts_with("create")));
}

// ---------------------------------------------------------------- register and delete

#[test]
fn register_needs_an_existing_path_and_delete_leaves_it_alone() {
    let node = Node::new();
    let m = node.manager();
    let rt = rt();
    let missing = node.work.path().join("nope");
    let err = rt
        .block_on(m.register(RegisterSpec::new("reg", &missing).with_id(ID1)))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "could not verify host path for \"reg\": stat {}: no such file or directory",
            missing.display()
        )
    );
    let path = node.work.path().join("existing");
    fs::create_dir(&path).unwrap();
    fs::write(path.join("data"), "keep me").unwrap();
    let v = rt
        .block_on(m.register(RegisterSpec::new("reg", &path).with_id(ID1)))
        .unwrap();
    assert!(v.is_registered() && v.plugin_id.is_none() && v.create_request.is_none());
    let outcome = rt.block_on(m.delete(ID1)).unwrap();
    assert!(matches!(outcome, DeleteOutcome::Unregistered(_)));
    assert_eq!(fs::read_to_string(path.join("data")).unwrap(), "keep me");
    assert!(rt.block_on(m.list()).unwrap().is_empty());
}

#[test]
fn delete_sends_the_stored_request_and_path_and_forgets_the_volume() {
    let node = Node::new();
    node.logging_plugin("logger");
    let m = node.manager();
    let rt = rt();
    let v = rt
        .block_on(
            m.create(
                VolumeSpec::new("logger", "data")
                    .with_id(ID1)
                    .with_namespace("prod"),
            ),
        )
        .unwrap();
    let outcome = rt.block_on(m.delete(ID1)).unwrap();
    assert!(matches!(outcome, DeleteOutcome::Deleted(_)));
    assert_eq!(
        node.calls()[1],
        format!("delete {ID1}|{}|data|prod", v.host_path)
    );
    assert!(!Path::new(&v.host_path).exists());
    assert!(rt.block_on(m.list()).unwrap().is_empty());
    // Unknown ids are reported, not sent to any plugin.
    assert!(
        matches!(rt.block_on(m.delete(ID1)).unwrap(), DeleteOutcome::NotFound { id } if id == ID1)
    );
    assert_eq!(node.calls().len(), 2);
}

#[test]
fn a_failed_plugin_delete_keeps_the_volume_and_its_name() {
    let node = Node::new();
    node.plugins.plugin(
        "stuck",
        &logging_script(&node.log(), "echo '{\"error\": \"device busy\"}'; exit 1"),
    );
    let m = node.manager();
    let rt = rt();
    let v = rt
        .block_on(m.create(VolumeSpec::new("stuck", "data").with_id(ID1)))
        .unwrap();
    let err = rt.block_on(m.delete(ID1)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "error deleting volume \"{ID1}\" with plugin \"stuck\": exit status 1: device busy"
        )
    );
    assert_eq!(rt.block_on(m.list()).unwrap().len(), 1);
    assert!(Path::new(&v.host_path).is_dir());
    let err = rt
        .block_on(m.create(VolumeSpec::new("mkdir", "data").with_id(ID2)))
        .unwrap_err();
    assert!(matches!(err, ManagerError::NameConflict { .. }));
}

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
}

impl HostVolumePlugin for CountingPlugin {
    fn id(&self) -> &str {
        "counting"
    }

    fn fingerprint(&self) -> BoxFuture<'_, PluginCall<Fingerprint>> {
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

    fn create<'a>(&'a self, req: &'a CreateRequest) -> BoxFuture<'a, PluginCall<CreateResponse>> {
        Box::pin(PluginCall::timed(
            Operation::Create,
            req.env(),
            async move {
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
        Box::pin(PluginCall::timed(Operation::Delete, req.env(), async {
            Ok(())
        }))
    }
}

#[test]
fn restore_runs_a_bounded_number_of_calls_at_once() {
    let node = Node::new();
    let rt = rt();
    let m = node
        .manager()
        .with_plugin(Arc::new(CountingPlugin::default()));
    for i in 0..21 {
        rt.block_on(m.create(VolumeSpec::new("counting", format!("v{i}"))))
            .unwrap();
    }
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

// ---------------------------------------------------------------- discovery

#[test]
fn discovery_probes_what_nomad_probes_and_says_why_plugins_are_left_out() {
    let node = Node::new();
    let dir = &node.plugins;
    dir.plugin("good", "#!/bin/sh\necho '{\"version\": \"v1.2\"}'\n");
    dir.plugin(".hidden", "#!/bin/sh\necho '{\"version\": \"3\"}'\n");
    std::os::unix::fs::symlink("good", dir.path().join("alias")).unwrap();
    dir.plugin("slow", "#!/bin/sh\nexec sleep 30\n");
    dir.plugin("broken", "#!/bin/sh\necho 'not json'\n");
    dir.plugin("failing", "#!/bin/sh\nexit 2\n");
    dir.plugin("noshebang", "echo '{\"version\": \"1\"}'\n");
    dir.plugin("readme", "not a plugin\n");
    fs::set_permissions(dir.path().join("readme"), fs::Permissions::from_mode(0o644)).unwrap();
    fs::create_dir(dir.path().join("subdir")).unwrap();
    fs::set_permissions(dir.path().join("subdir"), fs::Permissions::from_mode(0o755)).unwrap();
    let outside = Scratch::new();
    let target = outside.plugin("out", "#!/bin/sh\necho '{\"version\": \"9\"}'\n");
    std::os::unix::fs::symlink(&target, dir.path().join("escape")).unwrap();
    dir.plugin("mkdir", "#!/bin/sh\necho '{\"version\": \"9\"}'\n");

    let started = std::time::Instant::now();
    let fp = rt()
        .block_on(Fingerprinter::new(Some(dir.path().to_path_buf())).fingerprint())
        .unwrap();
    // Concurrent: the slow one costs its 1 s limit once, not once per plugin.
    assert!(started.elapsed() < Duration::from_secs(10));
    let attrs: Vec<String> = fp
        .attributes
        .iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    assert_eq!(
        attrs,
        [
            "plugins.host_volume..hidden.version = 3.0.0",
            "plugins.host_volume.alias.version = 1.2.0",
            "plugins.host_volume.good.version = 1.2.0",
            "plugins.host_volume.mkdir.version = 0.0.1",
        ]
    );
    let why: BTreeMap<_, _> = fp
        .discovery
        .left_out
        .iter()
        .map(|(k, v)| (k.as_str(), v.reason.as_str()))
        .collect();
    assert_eq!(
        why.keys().copied().collect::<Vec<_>>(),
        ["broken", "escape", "failing", "mkdir", "noshebang", "slow"]
    );
    assert_eq!(why["escape"], "no such plugin: \"escape\"");
    assert_eq!(
        why["failing"],
        "error getting version from plugin \"failing\": exit status 2"
    );
    assert_eq!(
        why["slow"],
        "error getting version from plugin \"slow\": signal: killed (no answer within the 1s fingerprint limit)"
    );
    assert!(
        why["broken"].starts_with("error parsing fingerprint output as json: "),
        "{}",
        why["broken"]
    );
    assert!(
        why["noshebang"].contains("exec format error"),
        "{}",
        why["noshebang"]
    );
    assert_eq!(why["mkdir"], "shadowed by the built-in \"mkdir\" plugin");
    assert!(processes_mentioning(&dir.path().to_string_lossy()).is_empty());
}

#[test]
fn a_missing_plugin_dir_is_empty_but_an_unreadable_one_is_an_error() {
    let node = Node::new();
    let rt = rt();
    let missing = node.work.path().join("no-such-dir");
    let fp = rt
        .block_on(Fingerprinter::new(Some(missing)).fingerprint())
        .unwrap();
    assert_eq!(
        fp.attributes.keys().collect::<Vec<_>>(),
        ["plugins.host_volume.mkdir.version"]
    );
    assert!(fp.discovery.left_out.is_empty());
    let file = node.work.path().join("a-file");
    fs::write(&file, "").unwrap();
    let err = rt
        .block_on(Fingerprinter::new(Some(file.clone())).fingerprint())
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("cannot read plugin dir {}: ", file.display())),
        "{err}"
    );
}

#[test]
fn fingerprinting_again_removes_plugins_that_are_gone() {
    let node = Node::new();
    node.logging_plugin("one");
    let two = node.logging_plugin("two");
    let m = node.manager();
    let rt = rt();
    let first = rt.block_on(m.fingerprint_plugins()).unwrap();
    assert_eq!(first.attributes.len(), 3);
    assert!(first.removed.is_empty());
    fs::remove_file(two).unwrap();
    let second = rt.block_on(m.fingerprint_plugins()).unwrap();
    assert_eq!(second.removed, ["plugins.host_volume.two.version"]);
    assert!(
        !second
            .attributes
            .contains_key("plugins.host_volume.two.version")
    );
    let third = rt.block_on(m.fingerprint_plugins()).unwrap();
    assert!(third.removed.is_empty());
}

#[test]
fn a_timeout_scale_shortens_the_fingerprint_limit() {
    let node = Node::new();
    node.plugins.plugin("slowish", "#!/bin/sh\nexec sleep 30\n");
    let fp = rt()
        .block_on(
            Fingerprinter::new(Some(node.plugins.path().to_path_buf()))
                .with_timeouts(Timeouts::default().scaled(0.1))
                .fingerprint(),
        )
        .unwrap();
    assert!(
        fp.discovery.left_out["slowish"]
            .reason
            .ends_with("(no answer within the 100ms fingerprint limit)")
    );
}

// ---------------------------------------------------------------- state

#[test]
fn a_corrupt_state_file_is_an_error_naming_it_and_is_left_untouched() {
    let node = Node::new();
    fs::create_dir(node.state()).unwrap();
    let file = node.state().join("state.json");
    fs::write(
        &file,
        "{\"schema\": \"dhv-conform/state/v1\", \"volumes\": {",
    )
    .unwrap();
    let err = HostVolumeManager::open(node.state()).unwrap_err();
    assert!(err.is_input_error());
    assert!(
        err.to_string()
            .starts_with(&format!("state file {} is corrupt: ", file.display())),
        "{err}"
    );
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        "{\"schema\": \"dhv-conform/state/v1\", \"volumes\": {"
    );
}

#[test]
fn a_corruption_after_open_fails_every_call_without_reset() {
    let node = Node::new();
    let m = node.manager();
    let rt = rt();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "a").with_id(ID1)))
        .unwrap();
    let file = node.state().join("state.json");
    fs::write(&file, "garbage").unwrap();
    for err in [
        rt.block_on(m.list()).unwrap_err(),
        rt.block_on(m.create(VolumeSpec::new("mkdir", "b").with_id(ID2)))
            .unwrap_err(),
        rt.block_on(m.delete(ID1)).unwrap_err(),
        rt.block_on(m.restore()).unwrap_err(),
    ] {
        assert!(
            err.to_string().contains(&file.display().to_string()),
            "{err}"
        );
    }
    assert_eq!(fs::read_to_string(&file).unwrap(), "garbage");
    assert!(!node.volumes().join(ID2).exists());
}

#[test]
fn a_temp_file_left_by_an_interrupted_write_is_ignored_then_cleaned() {
    let node = Node::new();
    let m = node.manager();
    let rt = rt();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "a").with_id(ID1)))
        .unwrap();
    // What a crash between "write temp" and "rename" leaves behind.
    let leftover = node.state().join(".state.json.crash1.tmp");
    fs::write(&leftover, "{\"schema\": \"dhv-conform/state/v1\", \"volu").unwrap();
    let listed = rt.block_on(node.manager().list()).unwrap();
    assert_eq!(
        listed.iter().map(|v| v.id.as_str()).collect::<Vec<_>>(),
        [ID1]
    );
    rt.block_on(m.create(VolumeSpec::new("mkdir", "b").with_id(ID2)))
        .unwrap();
    assert!(!leftover.exists());
    let names: Vec<_> = fs::read_dir(node.state())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, ["state.json", "state.lock"]);
}

#[test]
fn the_state_file_is_readable_json_with_the_full_request() {
    let node = Node::new();
    let m = node.manager().with_node_id("node-7").with_node_pool("gpu");
    let rt = rt();
    let params: BTreeMap<String, String> = [("mode".to_string(), "0750".to_string())].into();
    rt.block_on(
        m.create(
            VolumeSpec::new("mkdir", "a")
                .with_id(ID1)
                .with_parameters(params),
        ),
    )
    .unwrap();
    let doc: serde_json::Value =
        serde_json::from_slice(&fs::read(node.state().join("state.json")).unwrap()).unwrap();
    assert_eq!(doc["schema"], "dhv-conform/state/v1");
    let v = &doc["volumes"][ID1];
    assert_eq!(v["name"], "a");
    assert_eq!(v["plugin_id"], "mkdir");
    assert_eq!(
        v["host_path"],
        node.volumes().join(ID1).to_string_lossy().as_ref()
    );
    assert_eq!(v["create_request"]["node_id"], "node-7");
    assert_eq!(v["create_request"]["node_pool"], "gpu");
    assert_eq!(v["create_request"]["parameters"]["mode"], "0750");
    let mode = fs::metadata(node.volumes().join(ID1))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o750);
}

#[test]
fn the_node_id_is_generated_once_per_state_dir() {
    let node = Node::new();
    let first = HostVolumeManager::open(node.state())
        .unwrap()
        .node_id()
        .to_string();
    let again = HostVolumeManager::open(node.state())
        .unwrap()
        .node_id()
        .to_string();
    assert_eq!(first, again);
    assert!(dhv_conform::contract::is_valid_volume_id(&first), "{first}");
    let other = Node::new();
    assert_ne!(
        HostVolumeManager::open(other.state()).unwrap().node_id(),
        first
    );
}

#[test]
fn concurrent_creates_in_one_process_lose_nothing_and_share_no_name() {
    let node = Node::new();
    let m = Arc::new(node.manager());
    let rt = rt();
    let names = rt.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..16 {
            let m = Arc::clone(&m);
            // Half of them fight over one name.
            let name = if i % 2 == 0 {
                "shared".to_string()
            } else {
                format!("v{i}")
            };
            tasks.spawn(async move { m.create(VolumeSpec::new("mkdir", name)).await });
        }
        let mut ok = 0;
        while let Some(r) = tasks.join_next().await {
            match r.unwrap() {
                Ok(_) => ok += 1,
                Err(e) => assert!(matches!(e, ManagerError::NameConflict { .. }), "{e}"),
            }
        }
        assert_eq!(ok, 9);
        m.list().await.unwrap()
    });
    assert_eq!(names.len(), 9);
    assert_eq!(names.iter().filter(|v| v.name == "shared").count(), 1);
    assert_eq!(fs::read_dir(node.volumes()).unwrap().count(), 9);
}
