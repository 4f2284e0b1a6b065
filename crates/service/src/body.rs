//! Request bodies read strictly: [`StrictJson`].

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Request};
use axum::Json;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::error::ApiError;

/// A JSON body read as `T` under axum's `Json` rules (content type, syntax, size, the failing
/// field's path; a key given twice in a struct is refused by the typed read), and refused
/// too where serde's derive lets through what no client means (422, naming where):
/// - a field `T` has no place for, where `T` does not refuse it itself (a profile's misspelt
///   `recorded_on` was dropped without a word); a null one counts as absent;
/// - an array where `T`, or a struct inside it, has an object (serde reads a struct from a
///   sequence of its fields, so `["a", ["true"]]` was a job).
pub struct StrictJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Serialize> FromRequest<S> for StrictJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let (parts, body) = req.into_parts();
        let bytes = Bytes::from_request(Request::from_parts(parts.clone(), body), state)
            .await
            .map_err(|r| ApiError::Rejected { status: r.status(), message: r.body_text() })?;
        let Json(typed) = Json::<T>::from_request(Request::from_parts(parts, Body::from(bytes.clone())), state).await?;
        // Read again as text's own `Value` (the typed read succeeded, so it is JSON): the typed
        // one cannot say what it dropped, and a `Value` alone would drop a key given twice.
        let sent: Value = serde_json::from_slice(&bytes).map_err(|e| ApiError::BadRequest(format!("body: {e}")))?;
        let known = serde_json::to_value(&typed).map_err(crate::ServiceError::from)?;
        match mismatch(&sent, &known, "") {
            Some(Mismatch::Unknown(at)) => {
                Err(ApiError::Unprocessable(format!("unknown field `{at}`: no such field here")))
            }
            Some(Mismatch::ArrayForObject(at)) => {
                let at = if at.is_empty() { "the body".to_string() } else { format!("`{at}`") };
                Err(ApiError::Unprocessable(format!("{at}: an array where an object belongs")))
            }
            None => Ok(StrictJson(typed)),
        }
    }
}

/// What a request body holds that what it was read into does not, at a path.
#[derive(Debug, PartialEq)]
enum Mismatch {
    /// A field with no place (`samples[3].gpu_utl`).
    Unknown(String),
    /// An array where an object belongs.
    ArrayForObject(String),
}

/// The first [`Mismatch`] of `sent` (a request body) against `known` (what it was read into,
/// written back), at path `at`.
fn mismatch(sent: &Value, known: &Value, at: &str) -> Option<Mismatch> {
    match (sent, known) {
        (Value::Array(_), Value::Object(_)) => Some(Mismatch::ArrayForObject(at.to_string())),
        (Value::Object(s), Value::Object(k)) => s.iter().find_map(|(name, v)| {
            let path = if at.is_empty() { name.clone() } else { format!("{at}.{name}") };
            match k.get(name) {
                Some(kv) => mismatch(v, kv, &path),
                None if v.is_null() => None,
                None => Some(Mismatch::Unknown(path)),
            }
        }),
        (Value::Array(s), Value::Array(k)) => {
            s.iter().zip(k).enumerate().find_map(|(i, (v, kv))| mismatch(v, kv, &format!("{at}[{i}]")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_array_where_an_object_belongs_and_an_unknown_field_are_found_at_any_depth() {
        use Mismatch::{ArrayForObject, Unknown};
        let known = json!({ "app": { "name": "a" }, "samples": [{ "x": 1 }], "command": ["true"] });
        assert_eq!(mismatch(&json!(["a"]), &known, ""), Some(ArrayForObject(String::new())));
        assert_eq!(mismatch(&json!({ "app": ["a"] }), &known, ""), Some(ArrayForObject("app".into())));
        assert_eq!(mismatch(&json!({ "samples": [[1]] }), &known, ""), Some(ArrayForObject("samples[0]".into())));
        assert_eq!(mismatch(&json!({ "samples": [{ "y": 1 }] }), &known, ""), Some(Unknown("samples[0].y".into())));
        assert_eq!(mismatch(&json!({ "cwd": null, "app": { "name": "a" } }), &known, ""), None);
        assert_eq!(mismatch(&json!({ "command": ["true"], "app": { "name": "a" } }), &known, ""), None);
    }
}
