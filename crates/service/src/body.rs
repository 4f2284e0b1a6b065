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
/// too where serde's derive lets through what no client means: an array where `T`, or a
/// struct inside it, has an object (serde reads a struct from a sequence of its fields, so
/// `["a", ["true"]]` was a job). Keeps the body's own `Value` for the handler's further
/// checks (a field a profile has no place for).
pub struct StrictJson<T>(pub T, pub Value);

impl<S: Send + Sync, T: DeserializeOwned + Serialize> FromRequest<S> for StrictJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let (parts, body) = req.into_parts();
        let bytes = Bytes::from_request(Request::from_parts(parts.clone(), body), state)
            .await
            .map_err(|r| ApiError::Rejected { status: r.status(), message: r.body_text() })?;
        let Json(typed) = Json::<T>::from_request(Request::from_parts(parts, Body::from(bytes.clone())), state).await?;
        // The typed read succeeded, so the text is JSON.
        let sent: Value = serde_json::from_slice(&bytes).map_err(|e| ApiError::BadRequest(format!("body: {e}")))?;
        let known = serde_json::to_value(&typed).map_err(crate::ServiceError::from)?;
        if let Some(at) = array_for_object(&sent, &known, "") {
            let at = if at.is_empty() { "the body".to_string() } else { format!("`{at}`") };
            return Err(ApiError::Unprocessable(format!("{at}: an array where an object belongs")));
        }
        Ok(StrictJson(typed, sent))
    }
}

/// The path in `sent` (a request body) of the first array that `known` (what it was read
/// into, written back) has as an object.
fn array_for_object(sent: &Value, known: &Value, at: &str) -> Option<String> {
    match (sent, known) {
        (Value::Array(_), Value::Object(_)) => Some(at.to_string()),
        (Value::Object(s), Value::Object(k)) => s.iter().find_map(|(name, v)| {
            let path = if at.is_empty() { name.clone() } else { format!("{at}.{name}") };
            k.get(name).and_then(|kv| array_for_object(v, kv, &path))
        }),
        (Value::Array(s), Value::Array(k)) => {
            s.iter().zip(k).enumerate().find_map(|(i, (v, kv))| array_for_object(v, kv, &format!("{at}[{i}]")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_array_is_found_where_an_object_belongs_at_any_depth() {
        let known = json!({ "app": { "name": "a" }, "samples": [{ "x": 1 }], "command": ["true"] });
        assert_eq!(array_for_object(&json!(["a"]), &known, ""), Some(String::new()));
        assert_eq!(array_for_object(&json!({ "app": ["a"] }), &known, ""), Some("app".into()));
        assert_eq!(array_for_object(&json!({ "samples": [[1]] }), &known, ""), Some("samples[0]".into()));
        assert_eq!(array_for_object(&json!({ "command": ["true"], "app": { "name": "a" } }), &known, ""), None);
    }
}
