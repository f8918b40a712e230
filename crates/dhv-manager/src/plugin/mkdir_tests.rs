//! The built-in plugin against Nomad 2.0.5's `HostVolumePluginMkdir`, in its words.

use std::os::unix::fs::MetadataExt;

use super::*;

const ID: &str = "0b4d2f43-79b4-4d3c-9c42-5c1e8d3f5a10";

fn params(pairs: &[(&str, &str)]) -> Parameters {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn request(volumes_dir: &std::path::Path, parameters: Option<Parameters>) -> CreateRequest {
    CreateRequest {
        volumes_dir: volumes_dir.to_string_lossy().into_owned(),
        plugin_dir: String::new(),
        node_pool: "default".into(),
        namespace: "default".into(),
        volume_name: "v".into(),
        volume_id: ID.into(),
        capacity_min_bytes: 0,
        capacity_max_bytes: 0,
        node_id: String::new(),
        parameters,
    }
}

fn error_of(r: Result<CreateResponse, PluginError>) -> String {
    r.expect_err("create should fail").to_string()
}

#[test]
fn parameters_parse_as_nomads_decode_mkdir_params() {
    let ok: &[(&[(&str, &str)], Options)] = &[
        (
            &[],
            Options {
                mode: 0o700,
                uid: -1,
                gid: -1,
            },
        ),
        (
            &[("mode", "0755"), ("uid", "1000"), ("gid", "20")],
            Options {
                mode: 0o755,
                uid: 1000,
                gid: 20,
            },
        ),
        (
            &[("uid", "-1"), ("gid", "-1")],
            Options {
                mode: 0o700,
                uid: -1,
                gid: -1,
            },
        ),
        (
            &[("uid", "+7")],
            Options {
                mode: 0o700,
                uid: 7,
                gid: -1,
            },
        ),
        (
            &[("mode", "17777")],
            Options {
                mode: 0o17777,
                uid: -1,
                gid: -1,
            },
        ),
        (
            &[("mode", "37777777777")],
            Options {
                mode: u32::MAX,
                uid: -1,
                gid: -1,
            },
        ),
        (
            &[("mode", "755")],
            Options {
                mode: 0o755,
                uid: -1,
                gid: -1,
            },
        ),
    ];
    for (pairs, want) in ok {
        assert_eq!(
            parse_options(Some(&params(pairs))).unwrap(),
            *want,
            "{pairs:?}"
        );
    }
    assert_eq!(parse_options(None).unwrap().mode, 0o700);

    let bad: &[(&[(&str, &str)], &str)] = &[
        (
            &[("size", "1G")],
            r#"invalid value for "size": unknown mkdir parameter: "size""#,
        ),
        (
            &[("Mode", "0700")],
            r#"invalid value for "Mode": unknown mkdir parameter: "Mode""#,
        ),
        (
            &[("mode", "999")],
            r#"invalid value for "mode": strconv.ParseUint: parsing "999": invalid syntax"#,
        ),
        (
            &[("mode", "")],
            r#"invalid value for "mode": strconv.ParseUint: parsing "": invalid syntax"#,
        ),
        (
            &[("mode", "+755")],
            r#"invalid value for "mode": strconv.ParseUint: parsing "+755": invalid syntax"#,
        ),
        (
            &[("mode", "0o755")],
            r#"invalid value for "mode": strconv.ParseUint: parsing "0o755": invalid syntax"#,
        ),
        (
            &[("mode", "0x1ff")],
            r#"invalid value for "mode": strconv.ParseUint: parsing "0x1ff": invalid syntax"#,
        ),
        (
            &[("mode", "-1")],
            r#"invalid value for "mode": strconv.ParseUint: parsing "-1": invalid syntax"#,
        ),
        (
            &[("mode", "40000000000")],
            r#"invalid value for "mode": strconv.ParseUint: parsing "40000000000": value out of range"#,
        ),
        (
            &[("uid", "abc")],
            r#"invalid value for "uid": strconv.Atoi: parsing "abc": invalid syntax"#,
        ),
        (
            &[("gid", "")],
            r#"invalid value for "gid": strconv.Atoi: parsing "": invalid syntax"#,
        ),
        (
            &[("gid", "1.5")],
            r#"invalid value for "gid": strconv.Atoi: parsing "1.5": invalid syntax"#,
        ),
        (
            &[("uid", "99999999999999999999")],
            r#"invalid value for "uid": strconv.Atoi: parsing "99999999999999999999": value out of range"#,
        ),
        (
            &[("uid", " 1")],
            r#"invalid value for "uid": strconv.Atoi: parsing " 1": invalid syntax"#,
        ),
        (
            &[("uid", "\"")],
            r#"invalid value for "uid": strconv.Atoi: parsing "\"": invalid syntax"#,
        ),
    ];
    for (pairs, want) in bad {
        assert_eq!(
            parse_options(Some(&params(pairs))).unwrap_err().to_string(),
            *want
        );
    }
}

#[test]
fn create_is_idempotent_applies_mode_and_delete_removes() {
    let dir = tempfile::tempdir().unwrap();
    let req = request(dir.path(), Some(params(&[("mode", "0750")])));
    let resp = MkdirPlugin::create_now(&req).unwrap();
    let path = dir.path().join(ID);
    assert_eq!(resp.path, path.to_string_lossy());
    assert_eq!(resp.bytes, 0);
    assert_eq!(fs::metadata(&path).unwrap().mode() & 0o7777, 0o750);
    fs::write(path.join("keep"), b"x").unwrap();
    assert_eq!(MkdirPlugin::create_now(&req).unwrap(), resp);
    assert!(path.join("keep").exists());
    let del = DeleteRequest::for_created(&req, &resp.path);
    MkdirPlugin::delete_now(&del).unwrap();
    assert!(!path.exists());
    MkdirPlugin::delete_now(&del).unwrap();
}

#[test]
fn an_existing_path_is_returned_before_parameters_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(ID);
    fs::create_dir(&path).unwrap();
    let req = request(dir.path(), Some(params(&[("size", "1G"), ("mode", "999")])));
    assert_eq!(
        MkdirPlugin::create_now(&req).unwrap().path,
        path.to_string_lossy()
    );
    // Whatever is there: a regular file too.
    fs::remove_dir(&path).unwrap();
    fs::write(&path, b"").unwrap();
    assert_eq!(
        MkdirPlugin::create_now(&req).unwrap().path,
        path.to_string_lossy()
    );
    // The same bad parameters on a new volume fail (the first in key order).
    fs::remove_file(&path).unwrap();
    assert_eq!(
        error_of(MkdirPlugin::create_now(&req)),
        r#"invalid value for "mode": strconv.ParseUint: parsing "999": invalid syntax"#
    );
    assert!(!path.exists());
}

#[test]
fn file_system_errors_read_like_nomads() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join(ID);
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
    let req = request(dir.path(), None);
    assert_eq!(
        error_of(MkdirPlugin::create_now(&req)),
        format!(
            "error creating directory: mkdir {}: file exists",
            link.display()
        )
    );

    // A volumes dir under a regular file: os.Stat's own error, unwrapped.
    let file = dir.path().join("file");
    fs::write(&file, b"x").unwrap();
    let req = request(&file.join("volumes"), None);
    assert_eq!(
        error_of(MkdirPlugin::create_now(&req)),
        format!("stat {}/volumes/{ID}: not a directory", file.display())
    );

    // The path is filepath.Join's: cleaned.
    let dir = tempfile::tempdir().unwrap();
    let messy = format!("{}//./", dir.path().display());
    let req = request(std::path::Path::new(&messy), None);
    let resp = MkdirPlugin::create_now(&req).unwrap();
    assert_eq!(resp.path, format!("{}/{ID}", dir.path().display()));
}

#[test]
fn mode_is_a_go_file_mode_and_ids_of_minus_one_leave_the_owner() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(ID);
    // Beyond 0o7777 is accepted; Go's setuid bit is 1<<23, not 0o4000.
    for (mode, want) in [
        ("17777", 0o777),
        ("4755", 0o755),
        ("40000755", 0o4755),
        ("0", 0),
    ] {
        let req = request(dir.path(), Some(params(&[("mode", mode)])));
        MkdirPlugin::create_now(&req).unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().mode() & 0o7777,
            want,
            "mode {mode}"
        );
        fs::remove_dir(&path).unwrap();
    }
    let before = fs::metadata(dir.path()).unwrap();
    let req = request(dir.path(), Some(params(&[("uid", "-1"), ("gid", "-1")])));
    MkdirPlugin::create_now(&req).unwrap();
    let meta = fs::metadata(&path).unwrap();
    // A new directory gets our ids (or the parent's group, when it is setgid).
    assert_eq!(meta.uid(), nix::unistd::geteuid().as_raw());
    assert!(meta.gid() == nix::unistd::getegid().as_raw() || meta.gid() == before.gid());
    fs::remove_dir(&path).unwrap();
}

#[test]
fn a_failed_chown_removes_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(ID);
    let req = request(
        dir.path(),
        Some(params(&[("uid", "4242"), ("gid", "4242")])),
    );
    if nix::unistd::geteuid().is_root() {
        MkdirPlugin::create_now(&req).unwrap();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (4242, 4242));
    } else {
        assert_eq!(
            error_of(MkdirPlugin::create_now(&req)),
            format!(
                "error changing owner/group: chown {}: operation not permitted",
                path.display()
            )
        );
        assert!(!path.exists());
    }
}

/// The one deliberate difference: the path is built from the id, so an id
/// that is not a UUID (`..`, a path) is refused before anything is touched.
#[test]
fn a_volume_id_that_is_not_a_uuid_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for id in ["..", "../x", "a/b", "NOT-A-UUID"] {
        let mut req = request(dir.path(), None);
        req.volume_id = id.into();
        assert_eq!(
            error_of(MkdirPlugin::create_now(&req)),
            format!("invalid volume id {}", go_quote(id))
        );
        let del = DeleteRequest::for_created(&req, "");
        assert!(MkdirPlugin::delete_now(&del).is_err(), "{id}");
    }
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}
