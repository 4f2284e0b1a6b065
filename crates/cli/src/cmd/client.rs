//! Client commands for the placement service: `submit`, `submit-batch`, `jobs`, `job`, `cancel`.
//!
//! The server comes from `--server` or `DQNGPU_SERVER` (default http://127.0.0.1:7070); a
//! token from `--token-file` or `DQNGPU_TOKEN`.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::{json, Value};

use super::Format;

/// Where the service is.
#[derive(clap::Args, Debug, Clone)]
pub struct Conn {
    /// Service URL (else DQNGPU_SERVER, else http://127.0.0.1:7070).
    #[arg(long)]
    server: Option<String>,
    /// File holding the bearer token (else DQNGPU_TOKEN).
    #[arg(long)]
    token_file: Option<PathBuf>,
}

impl Conn {
    /// The service at `server` (else DQNGPU_SERVER, else http://127.0.0.1:7070), with the
    /// bearer token read from `token_file` (else DQNGPU_TOKEN).
    pub fn new(server: Option<String>, token_file: Option<PathBuf>) -> Self {
        Conn { server, token_file }
    }

    fn server(&self) -> String {
        self.server
            .clone()
            .or_else(|| std::env::var("DQNGPU_SERVER").ok().filter(|s| !s.is_empty()))
            .unwrap_or_else(|| "http://127.0.0.1:7070".into())
    }

    fn token(&self) -> anyhow::Result<Option<String>> {
        if let Some(p) = &self.token_file {
            let t = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            return Ok(Some(t.trim().to_string()));
        }
        Ok(std::env::var("DQNGPU_TOKEN").ok().filter(|t| !t.is_empty()))
    }

    fn request(&self, method: &str, path: &str) -> anyhow::Result<ureq::Request> {
        let url = format!("{}{path}", self.server().trim_end_matches('/'));
        let mut r = ureq::request(method, &url).timeout(std::time::Duration::from_secs(30));
        if let Some(t) = self.token()? {
            r = r.set("Authorization", &format!("Bearer {t}"));
        }
        Ok(r)
    }

    /// Sends and returns the JSON reply; an HTTP error carries the status and the service's
    /// message. The one HTTP client of the CLI: every command that talks to the service uses it.
    pub fn call(&self, method: &str, path: &str, body: Option<Value>, key: Option<&str>) -> anyhow::Result<Value> {
        let mut r = self.request(method, path)?;
        if let Some(k) = key {
            r = r.set("Idempotency-Key", k);
        }
        let resp = match body {
            Some(b) => r.send_json(b),
            None => r.call(),
        };
        let url = format!("{}{path}", self.server().trim_end_matches('/'));
        match resp {
            Ok(resp) => resp.into_json::<Value>().with_context(|| format!("reading the reply of {method} {url}")),
            Err(ureq::Error::Status(code, resp)) => {
                let text = resp.into_string().unwrap_or_default();
                let msg = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
                    .unwrap_or(text);
                anyhow::bail!("{method} {url}: the service answered HTTP {code}: {}", msg.trim())
            }
            Err(e) => Err(anyhow::Error::new(e).context(format!("cannot reach the service at {}", self.server()))),
        }
    }
}

/// `dqngpu submit` arguments.
#[derive(clap::Args, Debug)]
pub struct SubmitArgs {
    /// App name (its profile is looked up by this name).
    #[arg(long)]
    app: String,
    /// Extra environment variable for the job, `NAME=VALUE`; repeatable.
    #[arg(long = "env", value_parser = parse_env)]
    env: Vec<(String, String)>,
    /// Input size, MB (a number >= 0).
    #[arg(long, value_parser = parse_input_size)]
    input_size_mb: Option<f64>,
    /// Input parameters (free text).
    #[arg(long)]
    params: Option<String>,
    /// Makes a retried submit return the same job.
    #[arg(long)]
    idempotency_key: Option<String>,
    #[command(flatten)]
    conn: Conn,
    /// The job's program and arguments (after `--`).
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// `dqngpu submit-batch` arguments.
#[derive(clap::Args, Debug)]
pub struct BatchArgs {
    /// JSON file of the jobs (`-`: standard input): `{"jobs": [JOB, ...]}` or `[JOB, ...]`,
    /// each JOB as `POST /v1/jobs` takes it (`app`, `command`, optional `env`,
    /// `input_size_mb`, `params`).
    file: PathBuf,
    #[command(flatten)]
    conn: Conn,
}

/// Prints to stdout; a closed pipe (`| head`) ends the output quietly instead of panicking.
fn out(text: impl std::fmt::Display) -> anyhow::Result<()> {
    use std::io::Write;
    match writeln!(std::io::stdout().lock(), "{text}") {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// `--input-size-mb`: a finite number >= 0 (NaN would reach the server as JSON `null`, and the
/// job would be queued without it).
fn parse_input_size(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("`{s}` is not a number >= 0")),
    }
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    s.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).ok_or_else(|| format!("`{s}` is not NAME=VALUE"))
}

/// `dqngpu jobs` arguments.
#[derive(clap::Args, Debug)]
pub struct JobsArgs {
    /// Only jobs in this state.
    #[arg(long, value_parser = ["queued", "running", "succeeded", "failed", "cancelled"])]
    state: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    #[command(flatten)]
    conn: Conn,
}

/// `dqngpu job` arguments.
#[derive(clap::Args, Debug)]
pub struct JobArgs {
    /// Job id.
    id: u64,
    /// Also print the latest attempt's stdout and stderr.
    #[arg(long)]
    logs: bool,
    #[command(flatten)]
    conn: Conn,
}

/// `dqngpu cancel` arguments.
#[derive(clap::Args, Debug)]
pub struct CancelArgs {
    /// Job id.
    id: u64,
    #[command(flatten)]
    conn: Conn,
}

/// `dqngpu submit`: prints the new job's id.
pub fn submit(a: SubmitArgs) -> anyhow::Result<()> {
    let mut body = json!({ "app": a.app, "command": a.command, "env": a.env.into_iter().map(|(k, v)| (k, Value::String(v))).collect::<serde_json::Map<_, _>>() });
    if let Some(s) = a.input_size_mb {
        body["input_size_mb"] = json!(s);
    }
    if let Some(p) = a.params {
        body["params"] = json!(p);
    }
    let v = a.conn.call("POST", "/v1/jobs", Some(body), a.idempotency_key.as_deref())?;
    out(&v["id"])?;
    Ok(())
}

/// `dqngpu submit-batch`: queues the file's jobs as one batch (`POST /v1/jobs/batch`: all or
/// none, placed together); prints their ids, one per line, in the file's order.
pub fn submit_batch(a: BatchArgs) -> anyhow::Result<()> {
    let name = a.file.display().to_string();
    let text = if name == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading the batch from standard input")?
    } else {
        std::fs::read_to_string(&a.file).with_context(|| format!("reading {name}"))?
    };
    let v: Value = serde_json::from_str(&text).with_context(|| format!("{name}: not JSON"))?;
    let body = match v {
        Value::Array(jobs) => json!({ "jobs": jobs }),
        Value::Object(ref o) if o.contains_key("jobs") => v,
        _ => anyhow::bail!("{name}: expected {{\"jobs\": [...]}} or a JSON array of jobs"),
    };
    let reply =
        a.conn.call("POST", "/v1/jobs/batch", Some(body), None).with_context(|| format!("submitting {name}"))?;
    for j in reply["jobs"].as_array().into_iter().flatten() {
        out(&j["id"])?;
    }
    Ok(())
}

fn opt(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `dqngpu jobs`.
pub fn jobs(a: JobsArgs) -> anyhow::Result<()> {
    // Every job, a page at a time: the API answers at most PAGE jobs, and fewer past its byte
    // cap, per request; `next_after` says where the next page starts (null: none follows).
    const PAGE: usize = 1000;
    let state = a.state.as_deref().map(|s| format!("&state={s}")).unwrap_or_default();
    let mut jobs: Vec<Value> = Vec::new();
    let mut after = 0u64;
    loop {
        let v = a.conn.call("GET", &format!("/v1/jobs?limit={PAGE}&after={after}{state}"), None, None)?;
        let page = v["jobs"].as_array().cloned().unwrap_or_default();
        let next = match v.get("next_after") {
            Some(n) => n.as_u64(),
            // A server from before `next_after`: a full page may have more behind it.
            None => page.last().and_then(|j| j["id"].as_u64()).filter(|_| page.len() == PAGE),
        };
        jobs.extend(page);
        match next {
            Some(n) if n > after => after = n,
            _ => break,
        }
    }
    if a.format == Format::Json {
        out(serde_json::to_string_pretty(&jobs)?)?;
        return Ok(());
    }
    let mut table = format!("{:>8}  {:<20} {:<10} {:>4} {:>8} {:>5}", "ID", "APP", "STATE", "GPU", "ATTEMPTS", "EXIT");
    for j in &jobs {
        table.push_str(&format!(
            "\n{:>8}  {:<20} {:<10} {:>4} {:>8} {:>5}",
            opt(&j["id"]),
            opt(&j["app"]),
            opt(&j["state"]),
            opt(&j["gpu"]),
            opt(&j["attempts"]),
            opt(&j["exit_code"])
        ));
    }
    out(table)?;
    Ok(())
}

/// `dqngpu job ID`: the job as JSON, optionally with its logs.
pub fn job(a: JobArgs) -> anyhow::Result<()> {
    let v = a.conn.call("GET", &format!("/v1/jobs/{}", a.id), None, None)?;
    out(serde_json::to_string_pretty(&v)?)?;
    if a.logs && v["attempts"].as_u64().unwrap_or(0) > 0 {
        let l = a.conn.call("GET", &format!("/v1/jobs/{}/logs", a.id), None, None)?;
        let (o, e) = (l["stdout"].as_str().unwrap_or(""), l["stderr"].as_str().unwrap_or(""));
        out(format!("--- stdout (attempt {}) ---\n{o}--- stderr ---\n{e}", l["attempt"]))?;
    }
    Ok(())
}

/// `dqngpu cancel ID`.
pub fn cancel(a: CancelArgs) -> anyhow::Result<()> {
    let v = a.conn.call("DELETE", &format!("/v1/jobs/{}", a.id), None, None)?;
    out(serde_json::to_string(&v)?)
}
