//! What the manager does when its state cannot be written: a first create is
//! deleted again at the volume's own path, an update is left in place.

use super::*;

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
