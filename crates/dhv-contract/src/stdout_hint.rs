//! Why stdout did not decode, in the plugin author's words: Go's decoder says
//! `invalid character 'v' looking for beginning of value`; the author needs to
//! hear that a log line came before the JSON, and which one.

/// A diagnosis of a response that Nomad's decoder rejected, naming what the
/// plugin printed; `None` when the output's shape is not the problem (a wrong
/// type inside one JSON object, say: the decoder's own words say that).
pub fn stdout_hint(stdout: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stdout);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Some("stdout is empty: print the JSON response on stdout".to_owned());
    }
    let first_line = |s: &str| {
        let line = s.trim_start().lines().next().unwrap_or_default().trim_end();
        let cut: String = line.chars().take(300).collect();
        if cut.len() < line.len() {
            format!("{cut}…")
        } else {
            cut
        }
    };
    if !trimmed.starts_with('{') {
        let json_later = trimmed
            .lines()
            .skip(1)
            .any(|l| l.trim_start().starts_with('{'));
        return json_later.then(|| {
            format!(
                "text before the JSON on stdout — logs belong on stderr (first line: {:?})",
                first_line(trimmed)
            )
        });
    }
    let mut values = serde_json::Deserializer::from_str(trimmed).into_iter::<serde_json::Value>();
    match values.next() {
        Some(Ok(_)) => {
            let rest = &trimmed[values.byte_offset()..];
            (!rest.trim().is_empty()).then(|| {
                format!(
                    "text after the JSON on stdout — logs belong on stderr, and stdout holds one JSON object (first line after it: {:?})",
                    first_line(rest)
                )
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hint_table() {
        let cases: &[(&str, Option<&str>)] = &[
            (
                "",
                Some("stdout is empty: print the JSON response on stdout"),
            ),
            (
                "  \n",
                Some("stdout is empty: print the JSON response on stdout"),
            ),
            (
                "volume ready at /v/x\n{\"path\": \"/v/x\"}\n",
                Some(
                    "text before the JSON on stdout — logs belong on stderr (first line: \"volume ready at /v/x\")",
                ),
            ),
            (
                "{\"path\": \"/v/x\"}\ndone\n",
                Some(
                    "text after the JSON on stdout — logs belong on stderr, and stdout holds one JSON object (first line after it: \"done\")",
                ),
            ),
            ("{\"path\": \"/v/x\", \"bytes\": \"0\"}", None),
            ("{\"path\": \"/v/x\"}\n", None),
            ("1.0.0", None),
            ("{\"path\": ", None),
        ];
        for (stdout, want) in cases {
            assert_eq!(
                stdout_hint(stdout.as_bytes()).as_deref(),
                *want,
                "{stdout:?}"
            );
        }
    }
}
