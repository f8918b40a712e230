//! The manager never deletes what is not a volume's own: it saves any path
//! create returns, as Nomad does, except the volumes dir, a parent of it or a
//! relative path (refused, never saved, no delete sent with it; the create is
//! undone by a delete sent with the volume's own path); whether a failed save undoes the create is decided
//! from the state read under its lock; and a state that is ambiguous
//! (duplicate ids or names, ids that are not UUIDs) is refused untouched.

use crate::util;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::util::Node;
use crate::util::manager::{ID1, ID2, ID3};
use dhv_conform::manager::{Cleanup, ManagerError, VolumeSpec};

/// A plugin that returns `path` (a shell word) from create, and logs every
/// delete with its DHV_CREATED_PATH.
fn returning(node: &Node, id: &str, path: &str) -> PathBuf {
    let log = node.work.path().join("deletes.log");
    node.plugins.plugin(
        id,
        &format!(
            r#"#!/bin/sh
case "$1" in
fingerprint) echo '{{"version": "1.0.0"}}' ;;
create) /bin/mkdir -p "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"; printf '{{"path": "%s"}}\n' {path} ;;
delete) echo "$DHV_CREATED_PATH" >> '{log}' ;;
esac
"#,
            log = log.display()
        ),
    )
}

/// The volumes dir, a parent of it or a relative path: refused, never saved,
/// no delete sent with it; the first create is undone by a compensating
/// delete sent with the volume's own path.
#[test]
fn a_path_a_delete_would_wipe_every_volume_with_is_refused_and_undone() {
    let node = Node::new();
    let vd = node.volumes().display().to_string();
    let rt = util::runtime();
    let paths = [
        format!("'{vd}'"),
        format!("'{vd}/'"),
        format!("'{vd}//.'"),
        format!("'{vd}/x/..'"),
        format!("'{vd}/..'"),
        "/".to_string(),
        "relative/path".to_string(),
    ];
    for (i, path) in paths.iter().enumerate() {
        let id = format!("p{i}");
        returning(&node, &id, path);
        let err = rt
            .block_on(
                node.manager()
                    .create(VolumeSpec::new(&id, format!("v{i}")).with_id(ID1)),
            )
            .unwrap_err();
        assert!(
            matches!(&err, ManagerError::PathRefused { cleanup, .. } if matches!(**cleanup, Cleanup::Deleted)),
            "{path}: {err}"
        );
        assert!(
            err.to_string()
                .contains("one of its parents or not an absolute path"),
            "{err}"
        );
        assert!(
            rt.block_on(node.manager().list()).unwrap().is_empty(),
            "{path}: saved"
        );
    }
    let deletes = fs::read_to_string(node.work.path().join("deletes.log")).unwrap_or_default();
    let own = format!("{vd}/{ID1}");
    assert_eq!(
        deletes.lines().collect::<Vec<_>>(),
        vec![own.as_str(); paths.len()],
        "the compensating deletes"
    );
    assert!(node.volumes().is_dir());
}

/// Any other path is saved as Nomad saves it (a block device, a dir
/// elsewhere), and deleting the volume sends it back, as Nomad does.
#[test]
fn any_other_path_is_saved_as_nomad_saves_it() {
    let node = Node::new();
    let rt = util::runtime();
    for (i, path) in ["/dev/loop7", "/mnt/elsewhere"].iter().enumerate() {
        let id = format!("p{i}");
        returning(&node, &id, path);
        let volume = rt
            .block_on(
                node.manager()
                    .create(VolumeSpec::new(&id, format!("v{i}")).with_id(ID1)),
            )
            .unwrap();
        assert_eq!(volume.host_path, *path);
        assert_eq!(rt.block_on(node.manager().list()).unwrap().len(), 1);
        rt.block_on(node.manager().delete(ID1)).unwrap();
    }
    let deletes = fs::read_to_string(node.work.path().join("deletes.log")).unwrap_or_default();
    assert_eq!(
        deletes.lines().collect::<Vec<_>>(),
        ["/dev/loop7", "/mnt/elsewhere"]
    );
}

/// Two creates of one id race (two processes: two managers on one state dir).
/// The slow one's save fails (its name was taken meanwhile) after the fast one
/// saved the id: the slow one must not send a compensating delete, which
/// would remove the saved volume.
#[test]
fn a_failed_save_never_deletes_a_volume_another_create_saved() {
    let node = Node::new();
    let gate = node.work.path().join("gate");
    let waiting = node.work.path().join("waiting");
    let log = node.work.path().join("deletes.log");
    fs::write(&gate, "").unwrap();
    node.plugins.plugin(
        "slow",
        &format!(
            r#"#!/bin/sh
p="$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
case "$1" in
fingerprint) echo '{{"version": "1.0.0"}}' ;;
create)
    /bin/mkdir -p "$p"
    if [ "$DHV_VOLUME_NAME" = b ] && [ "$DHV_VOLUME_ID" = {ID1} ]; then
        : > '{waiting}'
        while [ -e '{gate}' ]; do /bin/sleep 0.01; done
    fi
    printf '{{"path": "%s"}}\n' "$p" ;;
delete) echo "$DHV_VOLUME_ID" >> '{log}'; /bin/rm -rf "$p" ;;
esac
"#,
            waiting = waiting.display(),
            gate = gate.display(),
            log = log.display(),
        ),
    );
    let rt = util::runtime();
    let slow = rt.spawn({
        let m = node.manager();
        async move { m.create(VolumeSpec::new("slow", "b").with_id(ID1)).await }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !waiting.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the slow create never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let other = node.manager();
    rt.block_on(other.create(VolumeSpec::new("slow", "b").with_id(ID2)))
        .unwrap();
    let saved = rt
        .block_on(other.create(VolumeSpec::new("slow", "a").with_id(ID1)))
        .unwrap();
    fs::write(Path::new(&saved.host_path).join("data"), "precious").unwrap();
    fs::remove_file(&gate).unwrap();

    let err = rt.block_on(slow).unwrap().unwrap_err();
    let ManagerError::NotSaved { cleanup, .. } = &err else {
        panic!("{err}");
    };
    assert!(matches!(cleanup, Cleanup::KeptExisting), "{err}");
    assert_eq!(
        fs::read_to_string(Path::new(&saved.host_path).join("data")).unwrap(),
        "precious"
    );
    assert!(fs::read_to_string(&log).unwrap_or_default().is_empty());
    let listed = rt.block_on(node.manager().list()).unwrap();
    assert_eq!(listed.len(), 2);
}

/// `volume list` on a state with one name twice: exit 2, one line naming
/// the file and the reason, and the file as it was.
#[test]
fn an_ambiguous_state_is_an_input_error_and_stays_untouched() {
    let node = Node::new();
    fs::create_dir_all(node.state()).unwrap();
    let file = node.state().join("state.json");
    let vol = |id: &str, name: &str| {
        format!(
            r#""{id}": {{"id": "{id}", "name": "{name}", "namespace": "default", "plugin_id": null,
                "host_path": "/srv/{id}", "bytes": 0, "create_request": null}}"#
        )
    };
    for (volumes, reason) in [
        (
            format!("{}, {}", vol(ID1, "a"), vol(ID3, "a")),
            "both have the name",
        ),
        (
            format!("{}, {}", vol(ID1, "a"), vol(ID1, "b")),
            "appears twice",
        ),
        (vol("../../etc", "a"), "is not a UUID"),
    ] {
        let text = format!(r#"{{"schema": "dhv-conform/state/v1", "volumes": {{{volumes}}}}}"#);
        fs::write(&file, &text).unwrap();
        for args in [vec!["list"], vec!["delete", "--id", ID1]] {
            let out = assert_cmd::Command::cargo_bin("dhv-conform")
                .unwrap()
                .arg("volume")
                .args(&args)
                .arg("--state-dir")
                .arg(node.state())
                .arg("--plugin-dir")
                .arg(node.plugins.path())
                .timeout(Duration::from_secs(30))
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(stderr.contains(reason), "{args:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert_eq!(fs::read_to_string(&file).unwrap(), text);
        }
    }
}

/// `volume` with `args` on `node`'s dirs.
fn volume_cmd(node: &Node, args: &[&str]) -> std::process::Output {
    assert_cmd::Command::cargo_bin("dhv-conform")
        .unwrap()
        .arg("volume")
        .args(args)
        .arg("--state-dir")
        .arg(node.state())
        .arg("--plugin-dir")
        .arg(node.plugins.path())
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap()
}

/// `state.json` as a symlink, to another node's state or to a name not made
/// yet, is an error (exit 2): nothing is read or written through it, no file
/// appears where it points, and the link stays as it was.
#[test]
fn a_state_file_that_is_a_symlink_is_never_followed() {
    let node = Node::new();
    let other = Node::new();
    fs::create_dir_all(node.state()).unwrap();
    fs::create_dir_all(other.state()).unwrap();
    let theirs = other.state().join("state.json");
    let text = format!(
        r#"{{"schema": "dhv-conform/state/v1", "volumes": {{"{ID1}": {{"id": "{ID1}", "name": "theirs", "namespace": "default", "plugin_id": null, "host_path": "/srv/theirs", "bytes": 0, "create_request": null}}}}}}"#
    );
    fs::write(&theirs, &text).unwrap();
    let fresh = other.state().join("made-through-a-link.json");
    let link = node.state().join("state.json");
    for target in [&theirs, &fresh] {
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(target, &link).unwrap();
        for args in [
            vec!["list"],
            vec!["register", "--name", "mine", "--path", "/srv/mine"],
        ] {
            let out = volume_cmd(&node, &args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(stderr.contains("symbolic link"), "{args:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert_eq!(
                fs::read_to_string(&theirs).unwrap(),
                text,
                "written through"
            );
            assert!(!fresh.exists(), "a file made through the link");
            assert_eq!(fs::read_link(&link).unwrap(), *target);
        }
    }
}

/// A state whose volume lives at `/` (or at an empty or relative path) is
/// refused on load, naming the volume and the path.
#[test]
fn a_state_with_a_host_path_of_the_root_is_refused() {
    let node = Node::new();
    fs::create_dir_all(node.state()).unwrap();
    let file = node.state().join("state.json");
    for (path, why) in [
        ("/", "is the root dir"),
        ("/srv/..", "is the root dir"),
        ("", "is empty"),
        ("srv", "is not an absolute path"),
    ] {
        let text = format!(
            r#"{{"schema": "dhv-conform/state/v1", "volumes": {{"{ID1}": {{"id": "{ID1}", "name": "n", "namespace": "default", "plugin_id": null, "host_path": "{path}", "bytes": 0, "create_request": null}}}}}}"#
        );
        fs::write(&file, &text).unwrap();
        for args in [vec!["list"], vec!["delete", "--id", ID1]] {
            let out = volume_cmd(&node, &args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{path:?} {args:?}: {stderr}");
            assert!(stderr.contains(why) && stderr.contains(ID1), "{stderr}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert_eq!(fs::read_to_string(&file).unwrap(), text);
        }
    }
}

/// A FIFO, a character device, a socket or a symlink planted as the state
/// dir's `state.lock` or `state.json` is refused at once (exit 2, one line
/// naming the file and what it is), never opened blocking, and left as it is.
#[test]
fn special_files_planted_in_the_state_dir_are_refused_naming_them() {
    use std::os::unix::fs::FileTypeExt as _;
    let root = nix::unistd::Uid::effective().is_root();
    if !root {
        util::skip(
            "special_files_planted_in_the_state_dir_are_refused_naming_them",
            "mknod of a character device needs root: that kind is not tried",
        );
    }
    for name in ["state.lock", "state.json"] {
        for kind in [
            "a FIFO",
            "a character device",
            "a socket",
            "a symbolic link",
        ] {
            if kind == "a character device" && !root {
                continue;
            }
            let node = Node::new();
            fs::create_dir_all(node.state()).unwrap();
            let planted = node.state().join(name);
            let _listener;
            match kind {
                "a FIFO" => {
                    nix::unistd::mkfifo(&planted, nix::sys::stat::Mode::from_bits_truncate(0o600))
                        .unwrap()
                }
                "a character device" => nix::sys::stat::mknod(
                    &planted,
                    nix::sys::stat::SFlag::S_IFCHR,
                    nix::sys::stat::Mode::from_bits_truncate(0o600),
                    nix::sys::stat::makedev(1, 3),
                )
                .unwrap(),
                "a socket" => {
                    _listener = std::os::unix::net::UnixListener::bind(&planted).unwrap();
                }
                _ => std::os::unix::fs::symlink("/nonexistent/elsewhere", &planted).unwrap(),
            }
            for args in [
                vec!["list"],
                vec!["register", "--name", "mine", "--path", "/srv/mine"],
            ] {
                let started = std::time::Instant::now();
                let out = volume_cmd(&node, &args);
                let stderr = String::from_utf8_lossy(&out.stderr);
                let what = format!("{name} as {kind}, {args:?}");
                assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
                assert!(
                    stderr.contains(&planted.display().to_string()) && stderr.contains(kind),
                    "{what}: {stderr}"
                );
                assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
                assert!(started.elapsed() < Duration::from_secs(10), "{what}");
            }
            let meta = fs::symlink_metadata(&planted).unwrap();
            let still = match kind {
                "a FIFO" => meta.file_type().is_fifo(),
                "a character device" => meta.file_type().is_char_device(),
                "a socket" => meta.file_type().is_socket(),
                _ => meta.file_type().is_symlink(),
            };
            assert!(still, "{name} as {kind} was replaced: {meta:?}");
        }
    }
}
