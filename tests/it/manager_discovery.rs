//! Discovery through the library API: what a Nomad client probes in the plugin
//! dir, why a plugin is left out, and fingerprinting again.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::util::manager::rt;
use crate::util::{Node, Scratch, processes_mentioning};
use dhv_conform::manager::Fingerprinter;
use dhv_conform::plugin::Timeouts;

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
        "error fingerprinting plugin \"failing\": exit status 2"
    );
    assert_eq!(
        why["slow"],
        "error fingerprinting plugin \"slow\": signal: killed (no answer within the 1s fingerprint limit)"
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
