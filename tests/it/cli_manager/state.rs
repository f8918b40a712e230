//! The volume commands' state dir across commands and processes: the node id
//! stays unless given, processes sharing the dir lose no volume and share no
//! name, and one killed mid-create leaves a readable state.

use super::*;

#[test]
fn the_node_id_is_stable_across_commands_unless_given() {
    let node = Node::new();
    node.json("create", &["--plugin", "mkdir", "--name", "a", "--id", ID1]);
    node.json("create", &["--plugin", "mkdir", "--name", "b", "--id", ID2]);
    let state: Value =
        serde_json::from_slice(&fs::read(node.state().join("state.json")).unwrap()).unwrap();
    let stored = state["node_id"].as_str().unwrap();
    assert_eq!(state["volumes"][ID1]["create_request"]["node_id"], stored);
    assert_eq!(state["volumes"][ID2]["create_request"]["node_id"], stored);
    node.json(
        "create",
        &[
            "--plugin",
            "mkdir",
            "--name",
            "a",
            "--id",
            ID1,
            "--node-id",
            "n-9",
            "--node-pool",
            "gpu",
        ],
    );
    let state: Value =
        serde_json::from_slice(&fs::read(node.state().join("state.json")).unwrap()).unwrap();
    assert_eq!(state["volumes"][ID1]["create_request"]["node_id"], "n-9");
    assert_eq!(state["volumes"][ID1]["create_request"]["node_pool"], "gpu");
    assert_eq!(state["node_id"], stored);
}

#[test]
fn separate_processes_sharing_a_state_dir_lose_no_volume_and_share_no_name() {
    let node = Node::new();
    let bin = assert_cmd::cargo::cargo_bin("dhv-conform");
    let spawn = |name: String| {
        std::process::Command::new(&bin)
            .args([
                "volume",
                "create",
                "--plugin",
                "mkdir",
                "--name",
                &name,
                "--state-dir",
            ])
            .arg(node.state())
            .arg("--volumes-dir")
            .arg(node.volumes())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Eight distinct names and six fighting over one, all at once.
    let children: Vec<_> = (0..8)
        .map(|i| spawn(format!("v{i}")))
        .chain((0..6).map(|_| spawn("shared".into())))
        .collect();
    let mut failures = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        if !out.status.success() {
            assert_eq!(out.status.code(), Some(1));
            failures.push(String::from_utf8_lossy(&out.stderr).into_owned());
        }
    }
    assert_eq!(failures.len(), 5, "{failures:?}");
    assert!(
        failures
            .iter()
            .all(|f| f.contains("volume name already exists on this node")),
        "{failures:?}"
    );
    let list = node.json("list", &[]);
    let volumes = list["volumes"].as_array().unwrap();
    assert_eq!(volumes.len(), 9);
    assert_eq!(volumes.iter().filter(|v| v["name"] == "shared").count(), 1);
    // Losers that got as far as creating were deleted again.
    assert_eq!(fs::read_dir(node.volumes()).unwrap().count(), 9);
}

#[test]
fn a_process_killed_mid_create_leaves_a_readable_state() {
    let node = Node::new();
    node.json(
        "create",
        &["--plugin", "mkdir", "--name", "before", "--id", ID1],
    );
    let before = fs::read(node.state().join("state.json")).unwrap();
    // The plugin reports its pid through a FIFO, then blocks until killed.
    let fifo = node.work.path().join("started");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    node.plugins.plugin(
        "hang",
        &format!(
            "#!/bin/sh\necho $$ > '{}'\nexec sleep 1001.25\n",
            fifo.display()
        ),
    );
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("dhv-conform"))
        .args([
            "volume",
            "create",
            "--plugin",
            "hang",
            "--name",
            "during",
            "--id",
            ID2,
            "--plugin-dir",
        ])
        .arg(node.plugins.path())
        .arg("--state-dir")
        .arg(node.state())
        .arg("--volumes-dir")
        .arg(node.volumes())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Opening the FIFO blocks until the plugin has started: no polling.
    let mut pid = String::new();
    fs::File::open(&fifo)
        .unwrap()
        .read_to_string(&mut pid)
        .unwrap();
    let plugin_pid: i32 = pid.trim().parse().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    // The plugin leads its own process group; with our process gone, end it here.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(plugin_pid),
        nix::sys::signal::Signal::SIGKILL,
    );

    assert_eq!(fs::read(node.state().join("state.json")).unwrap(), before);
    let list = node.json("list", &[]);
    let ids: Vec<_> = list["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].clone())
        .collect();
    assert_eq!(ids, [ID1]);
    node.json(
        "create",
        &["--plugin", "mkdir", "--name", "after", "--id", ID2],
    );
    assert!(processes_mentioning("1001.25").is_empty());
}
