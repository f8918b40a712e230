//! The HTML report (`check --html`, `report merge --html`, `report html`): one
//! self-contained page per run and per fleet.
//!
//! The text forms are exact; a page shows what they cannot: which calls overlapped
//! ([`timeline`]), how close each operation runs to its limit ([`distribution`]), and,
//! for a fleet, which nodes fail which checks ([`fleet`]). A page is a pure function of
//! the report, so `report html` renders a saved JSON report exactly as `check --html`
//! did. It makes no network reference and runs no script (its Content-Security-Policy
//! forbids both): inline SVG and a little CSS, readable offline and as a CI artifact.
//! Every string of the report is escaped by [`escape`], since a plugin's output is
//! hostile input.

mod distribution;
mod escape;
mod fleet;
mod page;
mod style;
mod timeline;

pub use fleet::to_fleet_html;
pub use page::to_html;

/// Milliseconds as a reader wants them: `0.42 ms`, `7.3 ms`, `812 ms`, `2.35 s`.
fn ms(value: f64) -> String {
    if !value.is_finite() {
        return "? ms".to_owned();
    }
    if value >= 1000.0 {
        format!("{:.2} s", value / 1000.0)
    } else if value >= 100.0 {
        format!("{value:.0} ms")
    } else if value >= 10.0 {
        format!("{value:.1} ms")
    } else {
        format!("{value:.2} ms")
    }
}

/// The head every page shares: no network, no script, the one stylesheet.
fn head(title: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{}</style>\n</head>\n",
        escape::attr(title),
        style::CSS
    )
}

/// The foot every page shares: which tool rendered it, from which schema,
/// and the end of the document.
fn foot(tool: &crate::ToolInfo, schema: &str) -> String {
    format!(
        "<footer class=\"note\"><p>Rendered by {} {} from a {} report.</p></footer>\n</body>\n</html>\n",
        escape::text(&tool.name),
        escape::text(&tool.version),
        escape::text(schema)
    )
}

#[cfg(test)]
mod tests {
    use super::ms;

    #[test]
    fn durations_read_well() {
        let cases = [
            (0.4213, "0.42 ms"),
            (7.25, "7.25 ms"),
            (42.04, "42.0 ms"),
            (812.4, "812 ms"),
            (2345.0, "2.35 s"),
            (f64::NAN, "? ms"),
        ];
        for (value, want) in cases {
            assert_eq!(ms(value), want);
        }
    }
}
