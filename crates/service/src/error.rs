//! The service's errors: [`ServiceError`] for the library, [`ApiError`] for HTTP replies.
//!
//! `ApiError` turns into a JSON body `{"error": {"code": .., "message": ..}}`. Client mistakes
//! name the problem; internal failures are logged and answered with a generic message, so no
//! database or file-system detail leaks to clients.

use std::path::PathBuf;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use dqngpu_model::{DecisionError, ModelError};

/// Errors of the service library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// The SQLite store failed.
    #[error("database: {0}")]
    Db(#[from] rusqlite::Error),
    /// A stored JSON column could not be read or written.
    #[error("stored JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A file or process operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or program.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A profile, library or cluster spec was invalid.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The policy's decision broke the rules.
    #[error(transparent)]
    Decision(#[from] DecisionError),
    /// The configuration is unusable.
    #[error("configuration: {0}")]
    Config(String),
    /// A store lock was poisoned by a panic elsewhere.
    #[error("internal lock poisoned")]
    Poisoned,
    /// Another service holds the data dir's lock ([`crate::lock`]).
    #[error(
        "data dir {}: another dqngpu serve{} holds it (lock file {}); stop that server or give this one another --data-dir",
        dir.display(),
        holder.map(|p| format!(" (pid {p})")).unwrap_or_default(),
        dir.join(crate::lock::LOCK_FILE).display()
    )]
    DataDirInUse {
        /// The data dir.
        dir: PathBuf,
        /// The holder's pid, when the lock file names one.
        holder: Option<u32>,
    },
}

impl ServiceError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ServiceError::Io { path: path.into(), source }
    }

    /// An I/O error that passes with time ([`crate::exec::is_transient`]: out of file
    /// descriptors, a full disk).
    pub fn is_transient(&self) -> bool {
        matches!(self, ServiceError::Io { source, .. } if crate::exec::is_transient(source))
    }
}

/// An HTTP error reply.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request is malformed (400).
    #[error("{0}")]
    BadRequest(String),
    /// The request is well-formed but refers to something unusable (422).
    #[error("{0}")]
    Unprocessable(String),
    /// Missing or wrong bearer token (401).
    #[error("missing or invalid bearer token")]
    Unauthorized,
    /// No such resource (404).
    #[error("{0}")]
    NotFound(String),
    /// The resource is in a state that forbids the request (409).
    #[error("{0}")]
    Conflict(String),
    /// A rejection from an extractor (JSON syntax, type, size), with its own status.
    #[error("{message}")]
    Rejected {
        /// Status the extractor chose (400, 413, 415, 422).
        status: StatusCode,
        /// What was wrong, from the extractor.
        message: String,
    },
    /// Anything internal (500); the details are logged, never sent.
    #[error("internal error")]
    Internal(#[from] ServiceError),
}

impl ApiError {
    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            ApiError::Unprocessable(_) => (StatusCode::UNPROCESSABLE_ENTITY, "unprocessable"),
            ApiError::Unauthorized => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            ApiError::Rejected { status, .. } => match *status {
                StatusCode::PAYLOAD_TOO_LARGE => (*status, "payload_too_large"),
                StatusCode::UNSUPPORTED_MEDIA_TYPE => (*status, "unsupported_media_type"),
                StatusCode::METHOD_NOT_ALLOWED => (*status, "method_not_allowed"),
                StatusCode::REQUEST_TIMEOUT => (*status, "request_timeout"),
                s => (s, "invalid_body"),
            },
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        if let ApiError::Internal(e) = &self {
            tracing::error!(error = %e, "internal error answering a request");
        }
        let body = serde_json::json!({ "error": { "code": code, "message": self.to_string() } });
        let mut resp = (status, Json(body)).into_response();
        if matches!(self, ApiError::Unauthorized) {
            resp.headers_mut().insert("www-authenticate", axum::http::HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(r: axum::extract::rejection::JsonRejection) -> Self {
        ApiError::Rejected { status: r.status(), message: r.body_text() }
    }
}

// A bad query string or path is a bad request like any other (`bad_request`), not a bad body:
// the request may have none.
impl From<axum::extract::rejection::QueryRejection> for ApiError {
    fn from(r: axum::extract::rejection::QueryRejection) -> Self {
        ApiError::BadRequest(format!("query: {}", r.body_text()))
    }
}

impl From<axum::extract::rejection::PathRejection> for ApiError {
    fn from(r: axum::extract::rejection::PathRejection) -> Self {
        ApiError::BadRequest(format!("path: {}", r.body_text()))
    }
}
