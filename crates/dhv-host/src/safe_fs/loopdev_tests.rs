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

/// A loop device held open by a process this one did not start (a shell's
/// child left to another parent, as another run's probe or a backup agent
/// is) stays attached after its detach, and the words of the wait name that
/// process: pid, command line, whose it is, and how it holds the device.
#[test]
fn a_detach_held_by_another_process_names_it() {
    let skip = |why: &str| {
        if std::env::var_os("DHV_REQUIRE_PRIVILEGED").is_some_and(|v| !v.is_empty()) {
            panic!("a_detach_held_by_another_process_names_it cannot run here ({why})");
        }
        println!("SKIPPED a_detach_held_by_another_process_names_it: {why}");
    };
    if !nix::unistd::Uid::effective().is_root() {
        return skip("needs root");
    }
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("img");
    std::fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    let dev = match attach(&image, dir.path()) {
        Ok(dev) => dev,
        Err(e) => return skip(&format!("no loop device to attach: {e}")),
    };
    // The holder is a grandchild whose parent exits at once: it is left to
    // the nearest subreaper, outside this process's tree. It says its pid
    // once it holds the device, and lives until its stdin closes.
    let mut shell = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            // An asynchronous list's stdin is /dev/null unless redirected.
            "exec 4<&0; sh -c 'exec 3<{dev}; echo $$; exec cat >/dev/null' <&4 &",
            dev = dev.device.display()
        ))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(shell.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let stdin = shell.stdin.take();
    shell.wait().unwrap();
    let holder: i32 = line.trim().parse().unwrap();
    let bound = std::time::Duration::from_millis(300);
    let held = detach_and_wait(&dev, bound);
    // Let go: the holder's stdin closes, it exits, the deferred detach ends.
    drop(stdin);
    let released = wait_detached(
        &dev,
        std::time::Instant::now() + std::time::Duration::from_secs(30),
    );
    let e = held.expect_err("a held device detached at once");
    let words = e.to_string();
    assert!(words.contains(&format!("PID {holder} (cat")), "{words}");
    assert!(words.contains("another program"), "{words}");
    assert!(
        words.contains(&format!("has {} open", dev.device.display())),
        "{words}"
    );
    assert!(released.is_ok(), "still attached once let go: {released:?}");
}
