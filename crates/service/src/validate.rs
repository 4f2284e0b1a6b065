//! Checks on what clients send: app names, argv, environment, idempotency keys.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::error::ApiError;
use crate::jobs::NewJob;

/// Most arguments in a command.
pub const MAX_ARGS: usize = 1024;
/// Longest argument, bytes.
pub const MAX_ARG_BYTES: usize = 16 * 1024;
/// Most environment variables.
pub const MAX_ENV: usize = 128;

/// The body of `POST /v1/jobs`. Unknown fields (such as a working directory) are refused.
#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    /// App name.
    pub app: String,
    /// argv.
    pub command: Vec<String>,
    /// Extra environment. A name given twice is refused (a JSON object may repeat a key; which
    /// value was meant is not known).
    #[serde(default, deserialize_with = "unique_env")]
    pub env: BTreeMap<String, String>,
    /// Input size, MB.
    #[serde(default)]
    pub input_size_mb: Option<f64>,
    /// Input parameters.
    #[serde(default)]
    pub params: Option<String>,
}

/// Reads `env`, refusing a name given twice (serde's map would keep the last silently).
fn unique_env<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    struct Env;
    impl<'de> serde::de::Visitor<'de> for Env {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object of variable names to string values")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((k, v)) = m.next_entry::<String, String>()? {
                if out.contains_key(&k) {
                    let name: String = k.chars().take(64).collect();
                    return Err(serde::de::Error::custom(format!(
                        "field `env.{name}` is given twice; give each variable once"
                    )));
                }
                out.insert(k, v);
            }
            Ok(out)
        }
    }
    d.deserialize_map(Env)
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::BadRequest(msg.into())
}

/// An app name: 1-128 characters of letters, digits, `.`, `_`, `-`.
pub fn app_name(name: &str) -> Result<(), ApiError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 128 || !name.chars().all(ok_char) {
        return Err(bad(format!(
            "field `app`: `{}` is not a valid app name (1-128 of letters, digits, `.`, `_`, `-`)",
            name.chars().take(64).collect::<String>()
        )));
    }
    Ok(())
}

/// Env names the service sets itself.
fn reserved_env(name: &str) -> bool {
    matches!(name, "CUDA_VISIBLE_DEVICES" | "CUDA_DEVICE_ORDER")
        || name.starts_with("CUDA_MPS_")
        || name.starts_with("DQNGPU_")
}

/// Finds the program the way `execvp` would: a path with a `/` as given, else on `PATH`.
pub fn program_exists(prog: &str, path_var: Option<&std::ffi::OsStr>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let is_exec = |p: &Path| p.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false);
    if prog.contains('/') {
        return Path::new(prog).is_absolute() && is_exec(Path::new(prog));
    }
    path_var.map(|pv| std::env::split_paths(pv).any(|d| is_exec(&d.join(prog)))).unwrap_or(false)
}

/// Validates a submission into a [`NewJob`].
pub fn submission(r: SubmitRequest) -> Result<NewJob, ApiError> {
    app_name(&r.app)?;
    if r.command.is_empty() {
        return Err(bad("field `command`: argv is empty; give at least the program"));
    }
    if r.command.len() > MAX_ARGS {
        return Err(bad(format!("field `command`: {} arguments, at most {MAX_ARGS}", r.command.len())));
    }
    for (i, a) in r.command.iter().enumerate() {
        if a.contains('\0') {
            return Err(bad(format!("field `command[{i}]`: contains a NUL byte")));
        }
        if a.len() > MAX_ARG_BYTES {
            return Err(bad(format!("field `command[{i}]`: {} bytes, at most {MAX_ARG_BYTES}", a.len())));
        }
    }
    let prog = &r.command[0];
    if prog.is_empty() {
        return Err(bad("field `command[0]`: the program is empty"));
    }
    if prog.contains('/') && !Path::new(prog).is_absolute() {
        return Err(ApiError::Unprocessable(format!(
            "field `command[0]`: `{prog}` is a relative path; give an absolute path or a name on the server's PATH"
        )));
    }
    // Looked up as the job will start it: on the job's own PATH when it sets one.
    let path_var = match r.env.get("PATH") {
        Some(p) => Some(std::ffi::OsString::from(p)),
        None => std::env::var_os("PATH"),
    };
    if !program_exists(prog, path_var.as_deref()) {
        let whose = if r.env.contains_key("PATH") { "the job's PATH (env.PATH)" } else { "the server's PATH" };
        return Err(ApiError::Unprocessable(format!(
            "field `command[0]`: program `{prog}` not found on {whose} (or not executable)"
        )));
    }
    if r.env.len() > MAX_ENV {
        return Err(bad(format!("field `env`: {} variables, at most {MAX_ENV}", r.env.len())));
    }
    for (k, v) in &r.env {
        let mut chars = k.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') || k.len() > 128 {
            return Err(bad(format!(
                "field `env`: `{}` is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*, at most 128 characters)",
                k.chars().take(64).collect::<String>()
            )));
        }
        if reserved_env(k) {
            return Err(bad(format!("field `env`: `{k}` is set by the service and cannot be chosen")));
        }
        if v.contains('\0') || v.len() > MAX_ARG_BYTES {
            return Err(bad(format!("field `env.{k}`: value has a NUL byte or is over {MAX_ARG_BYTES} bytes")));
        }
    }
    app_fields(r.input_size_mb, r.params.as_deref(), "")?;
    Ok(NewJob::from(r))
}

/// The app's prior info a job or a profile gives: an input size that is a number >= 0, and
/// params of at most [`MAX_ARG_BYTES`]. `prefix` is where the fields sit (`app.` in a profile).
pub fn app_fields(input_size_mb: Option<f64>, params: Option<&str>, prefix: &str) -> Result<(), ApiError> {
    if let Some(s) = input_size_mb {
        if !(s.is_finite() && s >= 0.0) {
            return Err(bad(format!("field `{prefix}input_size_mb`: {s} is not a non-negative number")));
        }
    }
    if params.is_some_and(|p| p.len() > MAX_ARG_BYTES) {
        return Err(bad(format!("field `{prefix}params`: over {MAX_ARG_BYTES} bytes")));
    }
    Ok(())
}

impl From<SubmitRequest> for NewJob {
    /// The request as a job, unchecked ([`submission`] checks it first).
    fn from(r: SubmitRequest) -> Self {
        NewJob { app: r.app, command: r.command, env: r.env, input_size_mb: r.input_size_mb, params: r.params }
    }
}

/// An `Idempotency-Key`: 1-200 visible ASCII characters.
pub fn idempotency_key(k: &str) -> Result<(), ApiError> {
    if k.is_empty() || k.len() > 200 || !k.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad("header `Idempotency-Key`: must be 1-200 visible ASCII characters"));
    }
    Ok(())
}
