//! The fleet JSON report (`report merge --json`): the serde form of [`FleetReport`].

use super::model::FleetReport;

/// Renders the fleet report as pretty JSON with a trailing newline.
pub fn to_fleet_json(fleet: &FleetReport) -> String {
    // Strings, numbers, bools, nulls and sequences only: serde_json cannot fail on it.
    let mut text = serde_json::to_string_pretty(fleet).expect("the fleet model always serialises");
    text.push('\n');
    text
}

/// Reads a fleet JSON report back. The schema string is not checked: compare
/// [`FleetReport::schema`] with [`super::FLEET_SCHEMA`].
pub fn from_fleet_json(text: &str) -> Result<FleetReport, serde_json::Error> {
    serde_json::from_str(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::{FLEET_SCHEMA, sample};

    #[test]
    fn round_trips_and_aligns_statuses_with_checks() {
        let fleet = sample::fleet();
        let text = to_fleet_json(&fleet);
        assert!(text.ends_with("}\n"));
        assert_eq!(from_fleet_json(&text).unwrap(), fleet);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["schema"], FLEET_SCHEMA);
        assert_eq!(
            value["nodes"][2]["statuses"],
            serde_json::json!(["pass", null, "warn", null])
        );
        assert_eq!(
            value["nodes"][0]["problems"][0]["reproduce"],
            "env -i DHV_OPERATION=create /p/create.succeeds create"
        );
        assert_eq!(value["summary"]["verdict"], "non-conformant");
    }
}
