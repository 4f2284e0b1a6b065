//! A small Kubernetes apiserver client over blocking HTTP (ureq, rustls): kubeconfig
//! (server, CA, bearer token or token file, client certificate; plain `http://` too) or the
//! in-cluster service account; list (paged), watch (a stream of JSON lines), get, JSON merge
//! patch and create.
//!
//! It speaks the same wire format kube-rs does; see docs/KUBERNETES.md for why it is not
//! kube-rs. Exec and auth-provider credential plugins are not supported.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::Value;

/// An apiserver call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiCallError {
    /// The apiserver answered with an error status.
    #[error("apiserver answered {status} to {what}: {message}")]
    Status {
        /// HTTP status.
        status: u16,
        /// The call.
        what: String,
        /// The Status object's message, or the body.
        message: String,
    },
    /// The apiserver could not be reached or the answer was unreadable.
    #[error("{what}: {message}")]
    Transport {
        /// The call.
        what: String,
        /// What went wrong.
        message: String,
    },
}

impl ApiCallError {
    /// The HTTP status, when there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiCallError::Status { status, .. } => Some(*status),
            ApiCallError::Transport { .. } => None,
        }
    }
}

/// The configuration could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{source_name}: {message}")]
pub struct ConfigError {
    /// The file or source.
    pub source_name: String,
    /// What was wrong (names the field).
    pub message: String,
}

/// Where the bearer token comes from.
#[derive(Debug, Clone)]
pub enum Token {
    /// None.
    None,
    /// A fixed token.
    Static(String),
    /// Read from a file at each call (service-account tokens rotate).
    File(PathBuf),
}

/// How to reach the apiserver.
#[derive(Clone)]
pub struct ApiConfig {
    /// Base URL, e.g. `https://10.0.0.1:443` (no trailing `/`).
    pub server: String,
    /// Bearer token.
    pub token: Token,
    /// TLS settings (cluster CA, client certificate); `None` uses the public web roots.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl std::fmt::Debug for ApiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiConfig").field("server", &self.server).field("custom_tls", &self.tls.is_some()).finish()
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct KubeConfig {
    #[serde(default)]
    current_context: String,
    #[serde(default)]
    contexts: Vec<Named<ContextEntry>>,
    #[serde(default)]
    clusters: Vec<Named<ClusterEntry>>,
    #[serde(default)]
    users: Vec<Named<UserEntry>>,
}

#[derive(Debug, Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "context", alias = "cluster", alias = "user")]
    value: T,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct ContextEntry {
    #[serde(default)]
    cluster: String,
    #[serde(default)]
    user: String,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct ClusterEntry {
    server: String,
    certificate_authority: Option<PathBuf>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct UserEntry {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<PathBuf>,
    client_certificate: Option<PathBuf>,
    client_certificate_data: Option<String>,
    client_key: Option<PathBuf>,
    client_key_data: Option<String>,
    exec: Option<serde_yaml::Value>,
    auth_provider: Option<serde_yaml::Value>,
}

fn cfg_err(src: &str, message: impl Into<String>) -> ConfigError {
    ConfigError { source_name: src.to_string(), message: message.into() }
}

fn pem_bytes(
    src: &str,
    field: &str,
    file: Option<&Path>,
    data: Option<&str>,
    base: &Path,
) -> Result<Option<Vec<u8>>, ConfigError> {
    if let Some(d) = data {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(d.trim())
            .map_err(|e| cfg_err(src, format!("field `{field}-data`: not base64: {e}")))?;
        return Ok(Some(bytes));
    }
    if let Some(f) = file {
        let p = if f.is_relative() { base.join(f) } else { f.to_path_buf() };
        let b = std::fs::read(&p).map_err(|e| cfg_err(src, format!("field `{field}`: {}: {e}", p.display())))?;
        return Ok(Some(b));
    }
    Ok(None)
}

fn tls_config(
    src: &str,
    ca: Option<&[u8]>,
    client: Option<(&[u8], &[u8])>,
) -> Result<Arc<rustls::ClientConfig>, ConfigError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    if let Some(pem) = ca {
        for c in CertificateDer::pem_slice_iter(pem) {
            let c = c.map_err(|e| cfg_err(src, format!("certificate authority: {e}")))?;
            roots.add(c).map_err(|e| cfg_err(src, format!("certificate authority: {e}")))?;
        }
        if roots.is_empty() {
            return Err(cfg_err(src, "certificate authority: no certificate in the PEM data"));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| cfg_err(src, format!("TLS: {e}")))?
        .with_root_certificates(roots);
    let cfg = match client {
        Some((cert, key)) => {
            let certs = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| cfg_err(src, format!("client certificate: {e}")))?;
            let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| cfg_err(src, format!("client key: {e}")))?;
            builder.with_client_auth_cert(certs, key).map_err(|e| cfg_err(src, format!("client certificate: {e}")))?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(cfg))
}

impl ApiConfig {
    /// Reads a kubeconfig file (its current context).
    pub fn from_kubeconfig(path: &Path) -> Result<ApiConfig, ConfigError> {
        let src = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| cfg_err(&src, e.to_string()))?;
        let kc: KubeConfig =
            serde_yaml::from_str(&text).map_err(|e| cfg_err(&src, format!("not a kubeconfig: {e}")))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let ctx = if kc.current_context.is_empty() && kc.contexts.len() == 1 {
            &kc.contexts[0].value
        } else {
            &kc.contexts
                .iter()
                .find(|c| c.name == kc.current_context)
                .ok_or_else(|| {
                    cfg_err(&src, format!("field `current-context`: no context named `{}`", kc.current_context))
                })?
                .value
        };
        let cluster = &kc
            .clusters
            .iter()
            .find(|c| c.name == ctx.cluster)
            .ok_or_else(|| {
                cfg_err(&src, format!("field `contexts[].context.cluster`: no cluster named `{}`", ctx.cluster))
            })?
            .value;
        let default_user = UserEntry::default();
        let user = kc.users.iter().find(|u| u.name == ctx.user).map(|u| &u.value).unwrap_or(&default_user);
        if user.exec.is_some() || user.auth_provider.is_some() {
            return Err(cfg_err(&src, "users[].user: exec and auth-provider credential plugins are not supported; use a token or a client certificate"));
        }
        let server = cluster.server.trim_end_matches('/').to_string();
        if !(server.starts_with("http://") || server.starts_with("https://")) {
            return Err(cfg_err(&src, format!("field `clusters[].cluster.server`: `{server}` is not an http(s) URL")));
        }
        let token = match (&user.token, &user.token_file) {
            (Some(t), _) => Token::Static(t.clone()),
            (None, Some(f)) => Token::File(if f.is_relative() { base.join(f) } else { f.clone() }),
            _ => Token::None,
        };
        let tls = if server.starts_with("https://") {
            if cluster.insecure_skip_tls_verify {
                return Err(cfg_err(
                    &src,
                    "field `insecure-skip-tls-verify` is not supported; give `certificate-authority-data`",
                ));
            }
            let ca = pem_bytes(
                &src,
                "certificate-authority",
                cluster.certificate_authority.as_deref(),
                cluster.certificate_authority_data.as_deref(),
                base,
            )?;
            let cert = pem_bytes(
                &src,
                "client-certificate",
                user.client_certificate.as_deref(),
                user.client_certificate_data.as_deref(),
                base,
            )?;
            let key = pem_bytes(&src, "client-key", user.client_key.as_deref(), user.client_key_data.as_deref(), base)?;
            let client = match (&cert, &key) {
                (Some(c), Some(k)) => Some((c.as_slice(), k.as_slice())),
                (None, None) => None,
                _ => {
                    return Err(cfg_err(
                        &src,
                        "users[].user: a client certificate needs both the certificate and the key",
                    ))
                }
            };
            match (&ca, client) {
                (None, None) => None,
                (ca, client) => Some(tls_config(&src, ca.as_deref(), client)?),
            }
        } else {
            None
        };
        Ok(ApiConfig { server, token, tls })
    }

    /// The in-cluster service account: `KUBERNETES_SERVICE_HOST`/`_PORT`, its token and CA.
    pub fn in_cluster() -> Result<ApiConfig, ConfigError> {
        let src = "in-cluster config";
        let host = std::env::var("KUBERNETES_SERVICE_HOST")
            .map_err(|_| cfg_err(src, "KUBERNETES_SERVICE_HOST is not set (not running in a pod?)"))?;
        let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
        let dir = Path::new("/var/run/secrets/kubernetes.io/serviceaccount");
        let ca = std::fs::read(dir.join("ca.crt"))
            .map_err(|e| cfg_err(src, format!("{}: {e}", dir.join("ca.crt").display())))?;
        let host = if host.contains(':') { format!("[{host}]") } else { host };
        Ok(ApiConfig {
            server: format!("https://{host}:{port}"),
            token: Token::File(dir.join("token")),
            tls: Some(tls_config(src, Some(&ca), None)?),
        })
    }
}

/// One watch event.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub kind: String,
    /// The object (a Status for `ERROR`).
    pub object: Value,
}

/// The apiserver client.
pub struct ApiClient {
    cfg: ApiConfig,
    agent: ureq::Agent,
    watch_agent: ureq::Agent,
}

fn agent(cfg: &ApiConfig, read: Duration) -> ureq::Agent {
    let mut b = ureq::AgentBuilder::new()
        .timeout_connect(Duration::from_secs(10))
        .timeout_read(read)
        .timeout_write(Duration::from_secs(30))
        .max_idle_connections_per_host(64);
    if let Some(t) = &cfg.tls {
        b = b.tls_config(t.clone());
    }
    b.build()
}

impl ApiClient {
    /// A client for `cfg`.
    pub fn new(cfg: ApiConfig) -> ApiClient {
        let a = agent(&cfg, Duration::from_secs(30));
        let w = agent(&cfg, Duration::from_secs(360));
        ApiClient { cfg, agent: a, watch_agent: w }
    }

    /// The server URL.
    pub fn server(&self) -> &str {
        &self.cfg.server
    }

    fn auth(&self, r: ureq::Request) -> ureq::Request {
        let token = match &self.cfg.token {
            Token::None => None,
            Token::Static(t) => Some(t.clone()),
            Token::File(p) => std::fs::read_to_string(p).ok().map(|t| t.trim().to_string()),
        };
        let r = r.set("Accept", "application/json");
        match token {
            Some(t) if !t.is_empty() => r.set("Authorization", &format!("Bearer {t}")),
            _ => r,
        }
    }

    fn result(what: &str, r: Result<ureq::Response, ureq::Error>) -> Result<ureq::Response, ApiCallError> {
        match r {
            Ok(resp) => Ok(resp),
            Err(ureq::Error::Status(status, resp)) => {
                let body = resp.into_string().unwrap_or_default();
                let message = serde_json::from_str::<Value>(&body)
                    .ok()
                    .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
                    .unwrap_or_else(|| body.chars().take(300).collect());
                Err(ApiCallError::Status { status, what: what.to_string(), message })
            }
            Err(e) => Err(ApiCallError::Transport { what: what.to_string(), message: e.to_string() }),
        }
    }

    fn json(what: &str, resp: ureq::Response) -> Result<Value, ApiCallError> {
        resp.into_json::<Value>()
            .map_err(|e| ApiCallError::Transport { what: what.to_string(), message: format!("unreadable answer: {e}") })
    }

    /// GET `path` as JSON.
    pub fn get(&self, path: &str) -> Result<Value, ApiCallError> {
        let what = format!("GET {path}");
        let r = Self::result(&what, self.auth(self.agent.get(&format!("{}{path}", self.cfg.server))).call())?;
        Self::json(&what, r)
    }

    /// Lists `path` in pages; returns the items and the list's resourceVersion.
    pub fn list(&self, path: &str) -> Result<(Vec<Value>, String), ApiCallError> {
        let mut items = Vec::new();
        let mut cont = String::new();
        loop {
            let mut url = format!("{path}?limit=500");
            if !cont.is_empty() {
                url.push_str(&format!("&continue={}", urlencode(&cont)));
            }
            let v = self.get(&url)?;
            if let Some(Value::Array(a)) = v.get("items") {
                items.extend(a.iter().cloned());
            }
            let meta = v.get("metadata");
            let rv = meta.and_then(|m| m.get("resourceVersion")).and_then(Value::as_str).unwrap_or("").to_string();
            cont = meta.and_then(|m| m.get("continue")).and_then(Value::as_str).unwrap_or("").to_string();
            if cont.is_empty() {
                return Ok((items, rv));
            }
        }
    }

    /// Watches `path` from `resource_version`, calling `on` per event until the stream ends
    /// (Ok) or `on` returns false.
    pub fn watch(
        &self,
        path: &str,
        resource_version: &str,
        mut on: impl FnMut(WatchEvent) -> bool,
    ) -> Result<(), ApiCallError> {
        let what = format!("WATCH {path}");
        let url = format!(
            "{}{path}?watch=true&allowWatchBookmarks=true&timeoutSeconds=290&resourceVersion={}",
            self.cfg.server,
            urlencode(resource_version)
        );
        let resp = Self::result(&what, self.auth(self.watch_agent.get(&url)).call())?;
        let mut reader = std::io::BufReader::new(resp.into_reader());
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) => return Err(ApiCallError::Transport { what, message: e.to_string() }),
            }
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(&line).map_err(|e| ApiCallError::Transport {
                what: what.clone(),
                message: format!("unreadable event: {e}"),
            })?;
            let kind = v.get("type").and_then(Value::as_str).unwrap_or("").to_string();
            let object = v.get("object").cloned().unwrap_or(Value::Null);
            if !on(WatchEvent { kind, object }) {
                return Ok(());
            }
        }
    }

    fn send(&self, method: &str, path: &str, content_type: &str, body: &Value) -> Result<Value, ApiCallError> {
        let what = format!("{method} {path}");
        let req = self
            .auth(self.agent.request(method, &format!("{}{path}", self.cfg.server)))
            .set("Content-Type", content_type);
        let r = Self::result(&what, req.send_string(&body.to_string()))?;
        Self::json(&what, r)
    }

    /// JSON merge patch.
    pub fn merge_patch(&self, path: &str, body: &Value) -> Result<Value, ApiCallError> {
        self.send("PATCH", path, "application/merge-patch+json", body)
    }

    /// POST (create).
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, ApiCallError> {
        self.send("POST", path, "application/json", body)
    }
}

/// Percent-encodes a query value.
pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_plain_http_with_token() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("kc");
        std::fs::write(&p, "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\nclusters:\n- name: k\n  cluster: {server: 'http://127.0.0.1:1/'}\nusers:\n- name: u\n  user: {token: abc}\n").unwrap();
        let c = ApiConfig::from_kubeconfig(&p).unwrap();
        assert_eq!(c.server, "http://127.0.0.1:1");
        assert!(matches!(c.token, Token::Static(ref t) if t == "abc"));
        std::fs::write(&p, "current-context: x\ncontexts: []\n").unwrap();
        let e = ApiConfig::from_kubeconfig(&p).unwrap_err().to_string();
        assert!(e.contains("current-context"), "{e}");
        std::fs::write(&p, "clusters: [{name: k, cluster: {server: 'https://h', certificate-authority-data: '!!'}}]\ncontexts: [{name: c, context: {cluster: k}}]\n").unwrap();
        let e = ApiConfig::from_kubeconfig(&p).unwrap_err().to_string();
        assert!(e.contains("certificate-authority-data"), "{e}");
    }
}
