//! The error messages Nomad shows when a plugin's create or delete fails.

use super::quote::go_quote;

/// Nomad's error after a failed create. `exit` is the [`ExitReason::go_string`](super::ExitReason::go_string);
/// `error_text` is what [`decode_failure_error`](super::decode_failure_error) found (`None`: stdout did not decode).
pub fn create_error_text(
    volume_id: &str,
    plugin: &str,
    exit: &str,
    error_text: Option<&str>,
) -> String {
    let head = format!(
        "error creating volume {} with plugin {}: {exit}",
        go_quote(volume_id),
        go_quote(plugin)
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
    plugin: &str,
    exit: &str,
    error_text: Option<&str>,
) -> String {
    let (id, plugin) = (go_quote(volume_id), go_quote(plugin));
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
    use crate::contract::ExitReason;

    const ID: &str = "0b6dfb33-3c4f-4fb8-9c2b-5e0d8a3b9d27";

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
