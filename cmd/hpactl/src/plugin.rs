//! `hpactl` as kubectl plugins: a copy or link of the binary named `kubectl-hpa_explain` is
//! `hpactl explain` (run as `kubectl hpa-explain`), one named `kubectl-hpa_simulate` is
//! `hpactl simulate` (`kubectl hpa-simulate`).
//!
//! kubectl finds a plugin as an executable on `PATH` whose name is `kubectl-` followed by the
//! command with `-` written `_` (`kubectl hpa-explain` runs `kubectl-hpa_explain`), and passes
//! it the remaining arguments. The plugin's help and errors name the command as the user typed
//! it (`Usage: kubectl hpa-explain ...`).

use std::ffi::OsString;
use std::path::Path;

use clap::{Arg, CommandFactory, FromArgMatches};
use hpa_config::VersionFlag;

use crate::{Cli, Command, SimulateArgs, explain::ExplainArgs};

/// What a plugin's command line asks for.
#[derive(Debug)]
pub enum Invocation {
    /// `--version` or `--version=raw` (alone): print the version and quit, as `hpactl
    /// --version` does.
    Version(VersionFlag),
    /// The subcommand.
    Run(Box<Command>),
}

/// The id of the plugins' `--version` argument.
const VERSION_ARG: &str = "plugin-version";

/// A subcommand of `hpactl` that is also a kubectl plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plugin {
    /// `kubectl-hpa_explain`: `hpactl explain`.
    Explain,
    /// `kubectl-hpa_simulate`: `hpactl simulate`.
    Simulate,
}

impl Plugin {
    /// Every plugin.
    pub const ALL: [Plugin; 2] = [Plugin::Explain, Plugin::Simulate];

    /// The executable's name kubectl looks for.
    pub fn file_name(self) -> &'static str {
        match self {
            Plugin::Explain => "kubectl-hpa_explain",
            Plugin::Simulate => "kubectl-hpa_simulate",
        }
    }

    /// How the user runs it.
    pub fn kubectl_command(self) -> &'static str {
        match self {
            Plugin::Explain => "kubectl hpa-explain",
            Plugin::Simulate => "kubectl hpa-simulate",
        }
    }

    /// The `hpactl` subcommand it is.
    fn subcommand(self) -> &'static str {
        match self {
            Plugin::Explain => "explain",
            Plugin::Simulate => "simulate",
        }
    }

    /// The plugin that `program` (argv\[0\]) names, if any: its file name without directory
    /// or extension (`kubectl-hpa_explain.exe` on Windows).
    pub fn of(program: &OsString) -> Option<Plugin> {
        let stem = Path::new(program).file_stem()?;
        Plugin::ALL.into_iter().find(|p| stem == p.file_name())
    }

    /// The subcommand's parser under the plugin's name: its arguments, help and errors, with
    /// `kubectl hpa-explain` where `hpactl explain` would be; and `hpactl`'s `--version`,
    /// which takes no other argument.
    pub fn clap_command(self) -> clap::Command {
        let sub = Cli::command()
            .find_subcommand(self.subcommand())
            .cloned()
            .unwrap_or_else(|| clap::Command::new(self.subcommand()));
        sub.name(self.kubectl_command())
            .bin_name(self.kubectl_command())
            .display_name(self.kubectl_command())
            .arg(
                Arg::new(VERSION_ARG)
                    .long("version")
                    .value_name("version")
                    .num_args(0..=1)
                    .require_equals(true)
                    .default_missing_value("true")
                    .value_parser(VersionFlag::parse)
                    .exclusive(true)
                    .help("--version, --version=raw prints version information and quits"),
            )
    }

    /// Parses the plugin's command line (program name first), exiting as clap does on
    /// `--help` (0) or bad arguments (2).
    pub fn parse(self, args: Vec<OsString>) -> Invocation {
        self.try_parse(args).unwrap_or_else(|e| e.exit())
    }

    fn try_parse(self, args: Vec<OsString>) -> Result<Invocation, clap::Error> {
        let matches = self.clap_command().try_get_matches_from(args)?;
        match matches.get_one::<VersionFlag>(VERSION_ARG) {
            Some(VersionFlag::False) | None => {}
            Some(&v) => return Ok(Invocation::Version(v)),
        }
        Ok(Invocation::Run(Box::new(match self {
            Plugin::Explain => Command::Explain(ExplainArgs::from_arg_matches(&matches)?),
            Plugin::Simulate => Command::Simulate(SimulateArgs::from_arg_matches(&matches)?),
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_program_name_says_the_plugin() {
        let of = |p: &str| Plugin::of(&OsString::from(p));
        assert_eq!(
            of("/usr/local/bin/kubectl-hpa_explain"),
            Some(Plugin::Explain)
        );
        assert_eq!(of("kubectl-hpa_explain.exe"), Some(Plugin::Explain));
        assert_eq!(of("./kubectl-hpa_simulate"), Some(Plugin::Simulate));
        assert_eq!(of("hpactl"), None);
        assert_eq!(of("/bin/kubectl-hpa_explainer"), None);
    }

    #[test]
    fn a_plugin_parses_its_subcommands_arguments() {
        let cmd = Plugin::Explain
            .try_parse(args(&["kubectl-hpa_explain", "ns/web", "-o", "json"]))
            .unwrap();
        assert!(
            matches!(&cmd, Invocation::Run(c) if matches!(&**c, Command::Explain(a) if a.hpa == "ns/web")),
            "{cmd:?}"
        );
        let cmd = Plugin::Simulate
            .try_parse(args(&["kubectl-hpa_simulate", "sim.yaml", "--out", "dir"]))
            .unwrap();
        assert!(
            matches!(&cmd, Invocation::Run(c) if matches!(&**c, Command::Simulate(a) if a.file == Path::new("sim.yaml"))),
            "{cmd:?}"
        );
    }

    #[test]
    fn a_plugin_prints_its_version_as_hpactl_does() {
        for plugin in Plugin::ALL {
            let name = plugin.file_name();
            let v = |a: &[&str]| plugin.try_parse(args(a));
            assert!(
                matches!(
                    v(&[name, "--version"]),
                    Ok(Invocation::Version(VersionFlag::True))
                ),
                "{plugin:?}"
            );
            assert!(matches!(
                v(&[name, "--version=raw"]),
                Ok(Invocation::Version(VersionFlag::Raw))
            ));
            // Alone only; and a reported version cannot be set, as with hpactl.
            assert!(v(&[name, "--version", "ns/web"]).is_err());
            let err = v(&[name, "--version=v1.2.3"]).unwrap_err().to_string();
            assert!(err.contains("not supported"), "{err}");
        }
        let help = Plugin::Explain.clap_command().render_help().to_string();
        assert!(help.contains("--version"), "{help}");
    }

    #[test]
    fn help_and_errors_name_the_kubectl_command() {
        let help = Plugin::Explain.clap_command().render_help().to_string();
        assert!(
            help.contains("Usage: kubectl hpa-explain [OPTIONS] <NAMESPACE/NAME>"),
            "{help}"
        );
        assert!(help.contains("--controller"), "{help}");
        let err = Plugin::Simulate
            .try_parse(args(&["kubectl-hpa_simulate"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("kubectl hpa-simulate"), "{err}");
    }
}
