//! Unit tests of the state file: parsing, refusals, writes.
use super::*;

#[test]
fn unusable_files_are_errors_naming_the_file() {
    let p = Path::new("/s/state.json");
    let cases: [(&str, &str); 6] = [
        (
            "",
            "state file /s/state.json is corrupt: EOF while parsing a value at line 1 column 0",
        ),
        (
            "{",
            "state file /s/state.json is corrupt: EOF while parsing an object at line 1 column 1",
        ),
        (
            "{}",
            "state file /s/state.json is not usable: no \"schema\" field (expected \"dhv-conform/state/v1\")",
        ),
        (
            r#"{"schema":"dhv-conform/state/v9","volumes":{}}"#,
            "state file /s/state.json is not usable: schema is \"dhv-conform/state/v9\", expected \"dhv-conform/state/v1\"",
        ),
        (
            r#"{"schema":"dhv-conform/state/v1"}"#,
            "state file /s/state.json is corrupt: missing field `volumes` at line 1 column 33",
        ),
        (
            r#"{"schema":"dhv-conform/state/v1","volumes":{"a":{"id":"b","name":"n","namespace":"d","plugin_id":null,"host_path":"/x","bytes":0,"create_request":null}}}"#,
            "state file /s/state.json is not usable: volume under key \"a\" has id \"b\"",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(
            parse_state(p, text.as_bytes()).unwrap_err().to_string(),
            want,
            "{text:?}"
        );
    }
}

const V1: &str = "0b4d2f43-79b4-4d3c-9c42-5c1e8d3f5a10";
const V2: &str = "1b4d2f43-79b4-4d3c-9c42-5c1e8d3f5a10";

fn volume(id: &str, name: &str) -> String {
    format!(
        r#""{id}": {{"id": "{id}", "name": "{name}", "namespace": "default", "plugin_id": null,
            "host_path": "/srv/{name}", "bytes": 0, "create_request": null}}"#
    )
}

/// Duplicate ids, duplicate names and ids that are not UUIDs are refused
/// with a reason naming them; nothing is written.
#[test]
fn ambiguous_states_are_refused() {
    for (volumes, reason) in [
        (
            format!("{}, {}", volume(V1, "a"), volume(V1, "b")),
            "appears twice",
        ),
        (
            format!("{}, {}", volume(V1, "a"), volume(V2, "a")),
            "both have the name \"a\"",
        ),
        (volume("v", "a"), "\"v\" is not a UUID"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        let text = format!(r#"{{"schema": "{STATE_SCHEMA}", "volumes": {{{volumes}}}}}"#);
        fs::write(&path, &text).unwrap();
        let err = read_state(&path).unwrap_err();
        assert!(matches!(err, StateError::Invalid { .. }), "{err}");
        assert!(err.to_string().contains(reason), "{err}");
        assert!(err.is_input_error());
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
    }
}

#[test]
fn a_written_state_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = State {
        node_id: Some("n1".into()),
        ..State::default()
    };
    state.volumes.insert(
        V1.into(),
        Volume {
            id: V1.into(),
            name: "data".into(),
            namespace: "default".into(),
            plugin_id: None,
            host_path: "/srv/data".into(),
            bytes: 0,
            create_request: None,
        },
    );
    write_state(dir.path(), &state).unwrap();
    let back = read_state(&dir.path().join(STATE_FILE)).unwrap();
    assert_eq!(back.node_id.as_deref(), Some("n1"));
    assert_eq!(back.volumes[V1].host_path, "/srv/data");
    assert!(back.volumes[V1].is_registered());
}

/// A process that keeps `state.lock` (a plugin's may lock a file it can
/// see) does not hang the next update: it fails after the bound, saying
/// so; once the holder lets go the lock is taken at once.
#[test]
fn a_lock_kept_by_another_holder_is_waited_for_within_a_bound() {
    let dir = tempfile::tempdir().unwrap();
    // Another open of the file: a lock of its own, as another process's is.
    let other = File::create(dir.path().join(LOCK_FILE)).unwrap();
    let held = Flock::lock(other, FlockArg::LockExclusiveNonblock).unwrap();
    let bound = std::time::Duration::from_millis(200);
    let started = std::time::Instant::now();
    let err = lock_dir_within(dir.path(), bound).unwrap_err().to_string();
    let waited = started.elapsed();
    assert!(waited >= bound, "{waited:?}");
    assert!(waited < bound * 10, "{waited:?}");
    assert!(
        err.contains("another process has held it for 0.2 s"),
        "{err}"
    );
    drop(held);
    assert!(lock_dir_within(dir.path(), bound).is_ok());
}
