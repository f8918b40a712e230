//! The error messages Nomad 2.0.5 shows when a plugin's call fails: the one
//! place their words are written (`client/hostvolumemanager/host_volume_plugin.go`).

use super::quote::{go_quote, go_quote_bytes};

/// Nomad's error after a fingerprint that did not exit 0 (or did not start,
/// or was killed at its time limit). `exit` is the
/// [`ExitReason::go_string`](super::ExitReason::go_string) or the `fork/exec` error.
pub fn fingerprint_error_text(plugin: &(impl AsRef<[u8]> + ?Sized), exit: &str) -> String {
    format!(
        "error fingerprinting plugin {}: {exit}",
        go_quote_bytes(plugin.as_ref())
    )
}

/// Nomad's error after a fingerprint that exited 0 but whose stdout did not
/// decode: `why` is Go's json error, or go-version's for a bad `version`
/// (Nomad decodes the version while decoding the JSON).
pub fn fingerprint_decode_error_text(why: &str) -> String {
    format!("error parsing fingerprint output as json: {why}")
}

/// Nomad's error after a failed create. `exit` is the [`ExitReason::go_string`](super::ExitReason::go_string);
/// `error_text` is what [`decode_failure_error`](super::decode_failure_error) found (`None`: stdout did not decode).
pub fn create_error_text(
    volume_id: &str,
    plugin: &(impl AsRef<[u8]> + ?Sized),
    exit: &str,
    error_text: Option<&str>,
) -> String {
    let head = format!(
        "error creating volume {} with plugin {}: {exit}",
        go_quote(volume_id),
        go_quote_bytes(plugin.as_ref())
    );
    match error_text {
        Some(text) => format!("{head}: {text}"),
        None => head,
    }
}

/// Nomad's error after a failed delete. `exit` is the [`ExitReason::go_string`](super::ExitReason::go_string);
/// `error_text` is what [`decode_failure_error`](super::decode_failure_error) found (`None`: stdout did not decode).
pub fn delete_error_text(
    volume_id: &str,
    plugin: &(impl AsRef<[u8]> + ?Sized),
    exit: &str,
    error_text: Option<&str>,
) -> String {
    let (id, plugin) = (go_quote(volume_id), go_quote_bytes(plugin.as_ref()));
    match error_text {
        Some(text) => format!("error deleting volume {id} with plugin {plugin}: {exit}: {text}"),
        None => format!(
            "error reading plugin response when deleting volume {id} with plugin {plugin}: original error: {exit}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExitReason;

    const ID: &str = "0b6dfb33-3c4f-4fb8-9c2b-5e0d8a3b9d27";

    #[test]
    fn fingerprint_texts_are_nomads() {
        assert_eq!(
            fingerprint_error_text("lvm", "exit status 1"),
            r#"error fingerprinting plugin "lvm": exit status 1"#
        );
        assert_eq!(
            fingerprint_error_text("slow", &ExitReason::Signal(9).go_string()),
            r#"error fingerprinting plugin "slow": signal: killed"#
        );
        assert_eq!(
            fingerprint_error_text("a\"b", "fork/exec /p/a\"b: exec format error"),
            r#"error fingerprinting plugin "a\"b": fork/exec /p/a"b: exec format error"#
        );
        assert_eq!(
            fingerprint_decode_error_text("malformed version: V1.2.3"),
            "error parsing fingerprint output as json: malformed version: V1.2.3"
        );
    }

    #[test]
    fn error_texts_are_nomads() {
        let exit = ExitReason::Code(1).go_string();
        assert_eq!(
            create_error_text(ID, "lvm", &exit, Some("disk full")),
            format!(r#"error creating volume "{ID}" with plugin "lvm": exit status 1: disk full"#)
        );
        assert_eq!(
            create_error_text(ID, "lvm", "signal: killed", None),
            format!(r#"error creating volume "{ID}" with plugin "lvm": signal: killed"#)
        );
        assert_eq!(
            create_error_text(ID, "lvm", &exit, Some("")),
            format!(r#"error creating volume "{ID}" with plugin "lvm": exit status 1: "#)
        );
        assert_eq!(
            delete_error_text(ID, "lvm", &exit, Some("busy")),
            format!(r#"error deleting volume "{ID}" with plugin "lvm": exit status 1: busy"#)
        );
        assert_eq!(
            delete_error_text(ID, "lvm", "exit status 2", None),
            format!(
                r#"error reading plugin response when deleting volume "{ID}" with plugin "lvm": original error: exit status 2"#
            )
        );
        // IDs are %q-quoted, as Go does.
        assert_eq!(
            create_error_text("a\"b", "p\\q\n", "exit status 1", None),
            r#"error creating volume "a\"b" with plugin "p\\q\n": exit status 1"#
        );
    }
}
