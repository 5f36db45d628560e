//! `stratum-mcp agents`: which agent CLIs this machine can launch, found on `PATH` (or at the
//! paths given) and asked for `--version` under the same environment allow-list and deadline
//! a run gets, so what it reports is what a run would meet.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use stratum_agents::{Agent, Connector, Detection, DetectionStatus};

use crate::print;

/// The binaries to look at; `None` looks the agent's name up on `PATH`.
pub struct Binaries {
    pub claude: Option<PathBuf>,
    pub codex: Option<PathBuf>,
    pub opencode: Option<PathBuf>,
}

pub fn agents(binaries: Binaries, json: bool) -> ExitCode {
    let detections = match detect(&binaries) {
        Ok(detections) => detections,
        Err(error) => {
            eprintln!("stratum-mcp: {error}");
            return ExitCode::FAILURE;
        }
    };
    if json || !std::io::stdout().is_terminal() {
        print::json_with(&serde_json::to_value(&detections).unwrap_or_default(), 0)
    } else {
        print::text_with(&human(&detections), 0)
    }
}

/// Each agent CLI, found and asked for its version (`stratum-mcp doctor` reports them too).
pub fn detect(binaries: &Binaries) -> Result<Vec<Detection>, String> {
    let connectors: Vec<Connector> = Agent::ALL
        .into_iter()
        .map(|agent| {
            let mut connector = Connector::new(agent);
            let binary = match agent {
                Agent::Claude => binaries.claude.clone(),
                Agent::Codex => binaries.codex.clone(),
                Agent::OpenCode => binaries.opencode.clone(),
            };
            if let Some(binary) = binary {
                connector.binary = binary;
            }
            connector
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the async runtime: {error}"))?;
    Ok(runtime.block_on(async {
        let mut detections = Vec::new();
        for connector in &connectors {
            detections.push(connector.detect().await);
        }
        detections
    }))
}

/// One line per agent: name, status, version or reason, path.
fn human(detections: &[Detection]) -> String {
    let mut text = String::new();
    for detection in detections {
        let path = detection
            .path
            .as_ref()
            .map_or_else(String::new, |path| format!("  ({})", path.display()));
        let line = match &detection.status {
            DetectionStatus::Found { version } => format!("found      {version}{path}"),
            DetectionStatus::NotFound => "not found  (install it, or give its path)".to_owned(),
            DetectionStatus::Failed { reason } => format!("failed     {reason}{path}"),
        };
        text.push_str(&format!("{:<9} {line}\n", detection.agent.name()));
    }
    text
}
