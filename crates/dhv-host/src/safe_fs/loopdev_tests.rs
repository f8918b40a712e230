//! The unit tests of `loopdev.rs`, in a file of their own.

use super::*;

#[test]
fn backing_paths_lose_the_deleted_mark_and_the_line_end() {
    assert_eq!(backing_path("/tmp/x/img\n"), "/tmp/x/img");
    assert_eq!(backing_path("/tmp/x/img (deleted)\n"), "/tmp/x/img");
    assert_eq!(backing_path("/tmp/a (deleted) b\n"), "/tmp/a (deleted) b");
}

#[test]
fn a_head_is_read_whole_from_a_file_too() {
    // A regular file stands in for a device: O_DIRECT or the fallback,
    // the bytes are the file's.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("img");
    std::fs::write(&file, vec![7u8; 8192]).unwrap();
    assert!(has_marker(&file, &[7u8; 5000]));
    assert!(!has_marker(&file, &[8u8; 16]));
    assert!(!has_marker(&dir.path().join("missing"), b"x"));
}

#[test]
fn only_an_attached_loop_device_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    // A device that is not a loop device, and a regular file.
    for device in [Path::new("/dev/null"), &file] {
        let dev = LoopDevice {
            device: device.to_path_buf(),
            backing_file: dir.path().join("img"),
        };
        let e = hold(&dev).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{device:?}: {e}");
        assert!(!is_attached(&dev));
    }
}

#[test]
fn partitions_name_the_sized_loop_devices_only() {
    let text = "major minor  #blocks  name\n\n 254        0  268435456 vda\n   7        0      1024 loop0\n   7        1          0 loop1\n 259        0       512 loop0p1\n   7       12    204800 loop12\n";
    assert_eq!(
        sized_loop_names(text).collect::<Vec<_>>(),
        ["loop0", "loop12"]
    );
}

#[test]
fn nothing_is_backed_by_a_fresh_dir() {
    let dir = tempfile::tempdir().unwrap();
    assert!(loops_backed_under(dir.path()).is_empty());
}
