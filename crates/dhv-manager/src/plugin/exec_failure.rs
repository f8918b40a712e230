//! Turns a failed `execve` into words a plugin author can act on.
//!
//! The kernel's answers are terse and misleading: a script with Windows line
//! endings fails with "No such file or directory" although the file is right
//! there. Reading the file's first line tells the real story.

use std::io::Read;
use std::path::Path;

/// Go's text for an errno from `fork/exec`, as Nomad prints it.
pub(crate) fn go_errno_text(err: &std::io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::ENOEXEC) => "exec format error".into(),
        Some(libc::ENOENT) => "no such file or directory".into(),
        Some(libc::EACCES) => "permission denied".into(),
        Some(libc::ETXTBSY) => "text file busy".into(),
        Some(libc::ENOTDIR) => "not a directory".into(),
        Some(libc::EISDIR) => "is a directory".into(),
        Some(libc::E2BIG) => "argument list too long".into(),
        // The one common errno whose words differ between Go and glibc.
        Some(libc::ESTALE) => "stale NFS file handle".into(),
        _ => {
            // std's text carries " (os error N)": keep only the words.
            let text = err.to_string();
            let text = text.split(" (os error").next().unwrap_or(&text).to_string();
            let mut chars = text.chars();
            match chars.next() {
                Some(first) => first.to_lowercase().chain(chars).collect(),
                None => text,
            }
        }
    }
}

/// Explains why `path` could not be executed.
pub(crate) fn start_failure(path: &Path, err: &std::io::Error) -> String {
    let first_line = read_first_line(path);
    match err.raw_os_error() {
        Some(libc::ENOEXEC) => match &first_line {
            Some(line) if !line.starts_with(b"#!") => "the file has no `#!` line, so the kernel cannot run it \
                 (Nomad runs plugins directly, never through a shell): add an interpreter line such as `#!/bin/sh`"
                .into(),
            _ => "the kernel does not recognise the file's format (exec format error)".into(),
        },
        Some(libc::ENOENT) => match &first_line {
            None => "the file does not exist".into(),
            Some(line) if line.starts_with(b"#!") => {
                let interp = String::from_utf8_lossy(&line[2..]).to_string();
                if interp.ends_with('\r') {
                    format!(
                        "the `#!` line ends in a carriage return (CRLF line endings), so the kernel looks for an \
                         interpreter named {:?}: convert the file to LF line endings",
                        interp.trim_start().split(' ').next().unwrap_or_default()
                    )
                } else {
                    let name = interp.split_whitespace().next().unwrap_or_default().to_string();
                    format!("the interpreter `{name}` named in the `#!` line does not exist")
                }
            }
            Some(_) => "a file the program needs to start (its ELF interpreter or a library) is missing".into(),
        },
        Some(libc::EACCES) => {
            let kind = std::fs::metadata(path).map(|m| m.file_type());
            if path.is_dir() {
                "the path is a directory, not an executable".into()
            } else if kind.is_ok_and(|k| !k.is_file()) {
                "the path is a FIFO, socket or device, not a regular file: the kernel executes \
                 only regular files, whatever the mode bits say"
                    .into()
            } else {
                "the file is not executable, or its interpreter is not (chmod +x)".into()
            }
        }
        _ => format!("the kernel refused to start it: {err}"),
    }
}

fn read_first_line(path: &Path) -> Option<Vec<u8>> {
    // A FIFO or device put in a plugin's place is never waited on.
    let mut file = dhv_host::safe_fs::open_regular(path, dhv_host::safe_fs::Links::Follow).ok()?;
    let mut buf = vec![0u8; 256];
    let n = file.read(&mut buf).ok()?;
    buf.truncate(n);
    let end = buf.iter().position(|b| *b == b'\n').unwrap_or(buf.len());
    buf.truncate(end);
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's `syscall.Errno` texts (lower case, glibc's words but for ESTALE).
    #[test]
    fn errno_texts_are_gos() {
        for (errno, want) in [
            (libc::ENOENT, "no such file or directory"),
            (libc::EEXIST, "file exists"),
            (libc::ENOTDIR, "not a directory"),
            (libc::EACCES, "permission denied"),
            (libc::EPERM, "operation not permitted"),
            (libc::EROFS, "read-only file system"),
            (libc::ENOSPC, "no space left on device"),
            (libc::ELOOP, "too many levels of symbolic links"),
            (libc::ENAMETOOLONG, "file name too long"),
            (libc::ENOTEMPTY, "directory not empty"),
            (libc::EBUSY, "device or resource busy"),
            (libc::ESTALE, "stale NFS file handle"),
        ] {
            let err = std::io::Error::from_raw_os_error(errno);
            assert_eq!(go_errno_text(&err), want, "errno {errno}");
        }
    }
}
