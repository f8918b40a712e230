//! Each operation's call, made and recorded in the [`OneRun`] `run` shows,
//! with the notes of where the built-in differs from Nomad's on it.

use super::{OneRun, remove_all_step_unsure};
use crate::cli::CliError;
use crate::contract::{self, CreateRequest, DeleteRequest};
use crate::plugin::{HostVolumePlugin, PluginRun};
use crate::report::{CreateOutput, VersionInfo};

impl OneRun {
    /// `fingerprint`: its version, or what the plugin printed as one.
    pub(super) async fn call_fingerprint(&mut self, plugin: &dyn HostVolumePlugin) {
        let call = plugin.fingerprint().await;
        if let Some(fp) = self.absorb(call) {
            self.version = Some(fp.version);
        }
        if self.version.is_none() {
            // Show what the plugin printed even when Nomad rejects the version.
            let stdout = self.run.as_ref().map(PluginRun::stdout).unwrap_or(&[]);
            self.version = crate::plugin::shown_version(stdout)
                .as_deref()
                .map(VersionInfo::from_raw);
        }
    }

    /// `create`: its response.
    pub(super) async fn call_create(
        &mut self,
        plugin: &dyn HostVolumePlugin,
        create: &CreateRequest,
    ) {
        if let Some(resp) = self.absorb(plugin.create(create).await) {
            self.response = Some(CreateOutput {
                path: resp.path,
                bytes: resp.bytes,
            });
        }
        let refused = crate::plugin::mkdir::refused_parameters(create.parameters.as_ref());
        let named = self
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("invalid value for "));
        if plugin.is_builtin() && named && refused > 1 {
            self.builtin_notes.push(format!(
                "{refused} mkdir parameters are invalid: Go walks the parameter map in \
                 random order, so Nomad names any one of them; this names the first in key order"
            ));
        }
    }

    /// `delete`.
    pub(super) async fn call_delete(
        &mut self,
        plugin: &dyn HostVolumePlugin,
        delete: &DeleteRequest,
    ) {
        self.absorb(plugin.delete(delete).await);
        let unsure = self.error.as_deref().is_some_and(remove_all_step_unsure);
        if plugin.is_builtin() && unsure {
            self.builtin_notes.push(
                "Go's os.RemoveAll names whichever of its inner steps failed (unlinkat, \
                 openfdat, ...) and the path below the volume where it failed; this names \
                 unlinkat of the volume's path"
                    .to_string(),
            );
        }
    }

    /// Any other operation, sent as it is: the built-in has none.
    pub(super) async fn call_unknown(
        &mut self,
        plugin: &dyn HostVolumePlugin,
        op: &str,
    ) -> Result<(), CliError> {
        let env = vec![(contract::var::OPERATION.to_string(), op.to_string())];
        let Some(run) = plugin.run_unknown(op, env).await else {
            return Err(CliError::usage(format!(
                "the built-in mkdir plugin has no operation {op:?} (fingerprint, create, delete)"
            )));
        };
        if !run.succeeded() {
            self.error = Some(format!("operation {op:?} failed: {}", run.exit_error()));
        }
        self.env = run.env.clone();
        self.run = Some(run);
        Ok(())
    }
}
