//! The one stylesheet of every page: status colours, the check table, the
//! charts; and the class that picks a call's colour in it.

use crate::model::Invocation;

/// The CSS inlined into each page's head.
pub const CSS: &str = r#"
:root{--pass:#2e7d32;--fail:#c62828;--warn:#ef6c00;--skip:#8a8a8a;--info:#1565c0;--absent:#e0e0e0;--kill:#6a1b9a;--late:#4e0000}
body{font:14px/1.4 system-ui,sans-serif;margin:0 auto;max-width:1280px;padding:0 16px 40px;color:#1a1a1a;background:#fff}
h1{margin:0;font-size:28px}h2{margin:28px 0 8px;font-size:20px;border-bottom:1px solid #ddd}h3{margin:16px 0 6px;font-size:16px}
header.top{padding:14px 16px;margin:12px 0;border-radius:6px;color:#fff}
header.top.conformant{background:var(--pass)}header.top.non-conformant{background:var(--fail)}
.counts span{margin-right:14px;font-weight:600}
nav a{margin-right:12px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0}
dl.facts dt{color:#555}dl.facts dd{margin:0;word-break:break-all}
code,pre{font:12px/1.35 ui-monospace,monospace}
pre{background:#f6f6f6;border:1px solid #e4e4e4;padding:6px 8px;margin:4px 0;white-space:pre-wrap;word-break:break-all;max-height:24em;overflow:auto}
.ctl{background:#fde2b8;color:#6d3b00;border-radius:2px;padding:0 1px;font-style:normal}
.badge{display:inline-block;min-width:3.2em;text-align:center;color:#fff;border-radius:3px;padding:0 4px;font-weight:600;font-size:12px}
.st-pass{background:var(--pass)}.st-fail{background:var(--fail)}.st-warn{background:var(--warn)}.st-skip{background:var(--skip)}.st-info{background:var(--info)}.st-absent{background:var(--absent)}
details.check{border-bottom:1px solid #eee}details.check>summary{cursor:pointer;padding:3px 0;list-style-position:inside}
details.check>summary .id{font-weight:600;margin:0 8px}
.lvl,.dur,.ncalls{color:#666;margin-right:8px;font-size:12px}
.first{color:#333;display:inline-block;max-width:62%;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;vertical-align:bottom}
details.io>summary{cursor:pointer;color:#555;font-size:12px}
details.check .body{padding:4px 0 10px 22px}
table{border-collapse:collapse}
table.calls{margin:6px 0;width:100%}table.calls th,table.calls td{border:1px solid #e4e4e4;padding:2px 6px;text-align:left;vertical-align:top}
table.calls td.out{padding:0 6px 6px}
.o-clean{fill:var(--pass);background:var(--pass)}.o-exit{fill:var(--fail);background:var(--fail)}.o-timeout{fill:var(--late);background:var(--late)}
.o-killed{fill:var(--kill);background:var(--kill)}.o-signal{fill:#b71c1c;background:#b71c1c}.o-unclean{fill:var(--warn);background:var(--warn)}.o-nostart{fill:var(--skip);background:var(--skip)}
.swatch{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px;vertical-align:middle}
svg{display:block;max-width:100%;height:auto;font:11px system-ui,sans-serif}
svg .grid{stroke:#e8e8e8}svg .axis{fill:#555}svg .lbl{fill:#222}svg .lbl.f-fail{fill:var(--fail);font-weight:700}svg .lbl.f-warn{fill:var(--warn);font-weight:700}svg .row{fill:#fafafa}
svg .kill{stroke:#000;stroke-width:1.5}svg .limit{stroke:var(--fail);stroke-width:2}svg .half{stroke:var(--warn);stroke-width:2;stroke-dasharray:5 3}
svg .pct{stroke:var(--info);stroke-width:1.5}svg .bin{fill:#5c7cfa}svg .dot{fill:#1a237e;fill-opacity:.55}
.note{color:#555}
table.heat{font-size:11px}table.heat th,table.heat td{border:1px solid #fff;padding:0}
table.heat td{width:14px;height:14px;text-align:center;color:#fff;font-size:9px}
table.heat thead th.node{writing-mode:vertical-rl;transform:rotate(180deg);padding:2px 0;font-weight:400;max-height:160px;white-space:nowrap;overflow:hidden}
table.heat thead th.node.non-conformant a{color:var(--fail);font-weight:700}
table.heat th.check{text-align:left;padding-right:8px;white-space:nowrap;font-weight:400}
table.heat td.cnt{width:auto;color:#444;padding:0 6px;white-space:nowrap;text-align:left}
th.odd-build,td.odd-build{outline:2px solid #ff9800}
table.builds th,table.builds td{border:1px solid #ddd;padding:2px 8px;text-align:left}
tr.differs{background:#fff3e0}
.node-card{border-top:1px solid #eee;padding:6px 0}
"#;

/// The class of a call's outcome: the colour of its row swatch and timeline bar.
pub(super) fn outcome_class(call: &Invocation) -> &'static str {
    if call.killed_by_check_ms.is_some() {
        "o-killed"
    } else if call.timed_out {
        "o-timeout"
    } else if call.signal.is_some() {
        "o-signal"
    } else if call.exit_code.is_none() {
        "o-nostart"
    } else if call.exit_code != Some(0) {
        "o-exit"
    } else if !call.is_clean() {
        "o-unclean"
    } else {
        "o-clean"
    }
}
