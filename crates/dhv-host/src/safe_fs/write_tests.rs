//! The unit tests of `write.rs`, in a file of their own.

use super::*;
use std::os::unix::fs::FileTypeExt;

#[test]
fn a_new_file_is_0644_less_the_umask() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("report.json");
    write_file(&path, b"{}", &WriteOptions::default()).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"{}");
    let umask = {
        // SAFETY: umask is process-wide but set straight back.
        let old = unsafe { libc::umask(0o022) };
        // SAFETY: puts back the mask read just above; umask cannot fail.
        unsafe { libc::umask(old) };
        old
    };
    let mode = fs::metadata(&path).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o644 & !(umask as u32));
}

#[test]
fn a_regular_file_is_replaced_and_keeps_its_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("out");
    fs::write(&path, "old and longer").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    let before = fs::metadata(&path).unwrap().ino();
    write_file(&path, b"new", &WriteOptions::default()).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"new");
    let after = fs::metadata(&path).unwrap();
    assert_ne!(after.ino(), before, "replaced, not rewritten");
    assert_eq!(after.mode() & 0o777, 0o600);
    assert_eq!(
        fs::read_dir(tmp.path()).unwrap().count(),
        1,
        "no temp file left"
    );
}

#[test]
fn a_symlink_survives_and_its_target_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir(tmp.path().join("real")).unwrap();
    let target = tmp.path().join("real/junit.xml");
    fs::write(&target, "old").unwrap();
    let link = tmp.path().join("link.xml");
    std::os::unix::fs::symlink("real/junit.xml", &link).unwrap();
    write_file(&link, b"new", &WriteOptions::default()).unwrap();
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read(&target).unwrap(), b"new");
}

#[test]
fn a_dangling_symlink_creates_its_target() {
    let tmp = tempfile::tempdir().unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink("made", &link).unwrap();
    write_file(&link, b"x", &WriteOptions::default()).unwrap();
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read(tmp.path().join("made")).unwrap(), b"x");
}

#[test]
fn a_device_is_written_in_place() {
    write_file(Path::new("/dev/null"), b"x", &WriteOptions::default()).unwrap();
    let meta = fs::metadata("/dev/null").unwrap();
    assert!(meta.file_type().is_char_device());
}

#[test]
fn a_fifo_without_a_reader_is_an_error_not_a_hang() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let err = write_file(&fifo, b"x", &WriteOptions::default()).unwrap_err();
    assert_eq!(err.source.raw_os_error(), Some(libc::ENXIO));
    assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn a_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(write_file(tmp.path(), b"x", &WriteOptions::default()).is_err());
    assert!(check_target(tmp.path()).is_err());
}

#[test]
fn check_target_wants_an_existing_parent() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(check_target(&tmp.path().join("new.json")).is_ok());
    let err = check_target(&tmp.path().join("missing/new.json")).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
    assert!(check_target(Path::new("/dev/null")).is_ok());
}

#[test]
fn a_link_planted_at_an_opened_output_is_replaced_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    fs::write(&victim, "outside").unwrap();
    for existed in [false, true] {
        let path = tmp.path().join("report.json");
        let _ = fs::remove_file(&path);
        if existed {
            fs::write(&path, "old").unwrap();
        }
        let out = Output::open(&path, WriteOptions::default()).unwrap();
        // What a plugin does mid-run.
        let _ = fs::remove_file(&path);
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        out.write(b"report").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "outside");
        assert!(fs::symlink_metadata(&path).unwrap().is_file());
        assert_eq!(fs::read(&path).unwrap(), b"report");
    }
}

#[test]
fn a_dir_swapped_for_a_link_does_not_redirect_the_write() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let dir = tmp.path().join("reports");
    fs::create_dir(&dir).unwrap();
    let out = Output::open(&dir.join("junit.xml"), WriteOptions::default()).unwrap();
    fs::rename(&dir, tmp.path().join("moved")).unwrap();
    std::os::unix::fs::symlink(&outside, &dir).unwrap();
    out.write(b"<x/>").unwrap();
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    assert_eq!(
        fs::read(tmp.path().join("moved/junit.xml")).unwrap(),
        b"<x/>"
    );
    let names: Vec<_> = fs::read_dir(tmp.path().join("moved")).unwrap().collect();
    assert_eq!(names.len(), 1, "no temp file left: {names:?}");
}

#[test]
fn an_output_knows_what_it_named_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let plugin = tmp.path().join("plugin");
    fs::write(&plugin, "#!/bin/sh").unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink("plugin", &link).unwrap();
    let out = Output::open(&link, WriteOptions::default()).unwrap();
    let meta = fs::metadata(&plugin).unwrap();
    assert_eq!(
        out.existing(),
        Some(super::super::FileId {
            dev: meta.dev(),
            ino: meta.ino()
        })
    );
    assert_eq!(out.resolved(), resolved_path(&plugin));
    assert_eq!(fs::read_to_string(&plugin).unwrap(), "#!/bin/sh");
}
