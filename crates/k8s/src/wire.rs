//! The wire format: kube-scheduler's extender/v1 types and the parts of core/v1 objects the
//! extender reads.
//!
//! The extender types (`ExtenderArgs`, `ExtenderFilterResult`, `HostPriority`,
//! `ExtenderBindingArgs`, `ExtenderBindingResult`) have no JSON tags in Go, so kube-scheduler
//! sends Go field names (`Pod`, `NodeNames`, `PodUID`); the core/v1 objects inside are
//! camelCase. Go's decoder matches object keys to fields case-insensitively and reads `null`
//! as "absent" for any field, so [`Obj`] does the same: a key matches its field exactly, else
//! case-insensitively; `null` reads as missing. Map keys (labels, annotations, resources)
//! stay case-sensitive, as in Go. Replies use Go's names and write nil slices and maps as
//! `null`.
//!
//! Decoding goes through [`serde_json::Value`] and never panics: wrong types are a
//! [`WireError`] naming the field path.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::units;

/// A field of the wire format had the wrong type or an unreadable value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("field `{path}`: {message}")]
pub struct WireError {
    /// Field path, Go style (`Pod.spec.containers[0].resources.limits`).
    pub path: String,
    /// What was wrong.
    pub message: String,
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A JSON object read with Go's decoder rules, remembering its path for errors.
#[derive(Debug, Clone)]
pub struct Obj<'a> {
    map: &'a Map<String, Value>,
    path: String,
}

/// A borrowed field with its path.
type Field<'a> = (&'a Value, String);

impl<'a> Obj<'a> {
    /// Reads `v` as an object at `path`.
    pub fn new(v: &'a Value, path: impl Into<String>) -> Result<Obj<'a>, WireError> {
        let path = path.into();
        match v {
            Value::Object(map) => Ok(Obj { map, path }),
            other => Err(WireError {
                path: if path.is_empty() { "body".into() } else { path },
                message: format!("expected an object, got {}", type_name(other)),
            }),
        }
    }

    fn sub(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.path)
        }
    }

    /// The field `name` (exact key, else a case-insensitive one); `None` when absent or null.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        let v = match self.map.get(name) {
            Some(v) => Some(v),
            None => self.map.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v),
        };
        v.filter(|v| !v.is_null())
    }

    fn bad(&self, name: &str, want: &str, got: &Value) -> WireError {
        WireError { path: self.sub(name), message: format!("expected {want}, got {}", type_name(got)) }
    }

    /// A string field; absent or null gives "".
    pub fn str(&self, name: &str) -> Result<&'a str, WireError> {
        match self.get(name) {
            None => Ok(""),
            Some(Value::String(s)) => Ok(s),
            Some(v) => Err(self.bad(name, "a string", v)),
        }
    }

    /// An integer field; absent or null gives `None`.
    pub fn i64(&self, name: &str) -> Result<Option<i64>, WireError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => n
                .as_i64()
                .map(Some)
                .ok_or_else(|| WireError { path: self.sub(name), message: format!("`{n}` is not an integer") }),
            Some(v) => Err(self.bad(name, "an integer", v)),
        }
    }

    /// A boolean field; absent or null gives false.
    pub fn bool(&self, name: &str) -> Result<bool, WireError> {
        match self.get(name) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(self.bad(name, "a boolean", v)),
        }
    }

    /// An object field; absent or null gives `None`.
    pub fn obj(&self, name: &str) -> Result<Option<Obj<'a>>, WireError> {
        match self.get(name) {
            None => Ok(None),
            Some(v @ Value::Object(_)) => Obj::new(v, self.sub(name)).map(Some),
            Some(v) => Err(self.bad(name, "an object", v)),
        }
    }

    /// An array field's items with their paths; absent or null gives an empty list.
    pub fn items(&self, name: &str) -> Result<Vec<Field<'a>>, WireError> {
        match self.get(name) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => {
                Ok(a.iter().enumerate().map(|(i, v)| (v, format!("{}[{i}]", self.sub(name)))).collect())
            }
            Some(v) => Err(self.bad(name, "an array", v)),
        }
    }

    /// A list of strings; absent or null gives `None` (Go's nil slice).
    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>, WireError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => Ok(s.clone()),
                    // Go decodes null into a string element as "".
                    Value::Null => Ok(String::new()),
                    other => Err(WireError {
                        path: format!("{}[{i}]", self.sub(name)),
                        message: format!("expected a string, got {}", type_name(other)),
                    }),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(v) => Err(self.bad(name, "an array of strings", v)),
        }
    }

    /// A map of strings (labels, annotations); keys stay case-sensitive. Quantities written
    /// as JSON numbers are accepted as their text.
    pub fn string_map(&self, name: &str) -> Result<BTreeMap<String, String>, WireError> {
        match self.get(name) {
            None => Ok(BTreeMap::new()),
            Some(Value::Object(m)) => m
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    Value::Number(n) => Ok((k.clone(), n.to_string())),
                    other => Err(WireError {
                        path: format!("{}[{k:?}]", self.sub(name)),
                        message: format!("expected a string, got {}", type_name(other)),
                    }),
                })
                .collect(),
            Some(v) => Err(self.bad(name, "an object of strings", v)),
        }
    }
}

/// A container's GPU-relevant resources.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerInfo {
    /// Container name.
    pub name: String,
    /// `resources.limits`, quantity text by resource name.
    pub limits: BTreeMap<String, String>,
    /// `resources.requests`.
    pub requests: BTreeMap<String, String>,
}

/// How a container last ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Terminated {
    /// `reason` (`OOMKilled`, `Error`, `Completed`).
    pub reason: String,
    /// Exit code.
    pub exit_code: i64,
    /// Start, Unix s.
    pub started_s: Option<f64>,
    /// End, Unix s.
    pub finished_s: Option<f64>,
}

/// A container's status.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerStatus {
    /// Container name.
    pub name: String,
    /// Set when it has terminated.
    pub terminated: Option<Terminated>,
    /// Its previous run's end, after a restart.
    pub last_terminated: Option<Terminated>,
    /// Restarts so far.
    pub restart_count: i64,
}

/// The parts of a core/v1 Pod the extender reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodInfo {
    /// `metadata.namespace` ("default" when empty).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// True when `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `spec.nodeName` ("" when unbound).
    pub node_name: String,
    /// `spec.schedulerName`.
    pub scheduler_name: String,
    /// `spec.initContainers`.
    pub init_containers: Vec<ContainerInfo>,
    /// `spec.containers`.
    pub containers: Vec<ContainerInfo>,
    /// `status.phase`.
    pub phase: String,
    /// `status.startTime`, Unix s.
    pub start_s: Option<f64>,
    /// `status.containerStatuses`.
    pub statuses: Vec<ContainerStatus>,
}

impl PodInfo {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// True when the pod has finished (Succeeded or Failed).
    pub fn finished(&self) -> bool {
        matches!(self.phase.as_str(), "Succeeded" | "Failed")
    }

    /// Reads a Pod object (camelCase keys, matched case-insensitively).
    pub fn from_value(v: &Value, path: &str) -> Result<PodInfo, WireError> {
        let o = Obj::new(v, path)?;
        let mut p = PodInfo::default();
        if let Some(m) = o.obj("metadata")? {
            p.namespace = m.str("namespace")?.to_string();
            p.name = m.str("name")?.to_string();
            p.uid = m.str("uid")?.to_string();
            p.resource_version = m.str("resourceVersion")?.to_string();
            p.labels = m.string_map("labels")?;
            p.annotations = m.string_map("annotations")?;
            p.deleting = m.get("deletionTimestamp").is_some();
        }
        if p.namespace.is_empty() {
            p.namespace = "default".into();
        }
        if let Some(s) = o.obj("spec")? {
            p.node_name = s.str("nodeName")?.to_string();
            p.scheduler_name = s.str("schedulerName")?.to_string();
            p.init_containers = read_containers(&s, "initContainers")?;
            p.containers = read_containers(&s, "containers")?;
        }
        if let Some(st) = o.obj("status")? {
            p.phase = st.str("phase")?.to_string();
            p.start_s = time_field(&st, "startTime")?;
            for (cv, cpath) in st.items("containerStatuses")? {
                let c = Obj::new(cv, cpath)?;
                let terminated = match c.obj("state")? {
                    Some(state) => state.obj("terminated")?.map(|t| read_terminated(&t)).transpose()?,
                    None => None,
                };
                let last_terminated = match c.obj("lastState")? {
                    Some(state) => state.obj("terminated")?.map(|t| read_terminated(&t)).transpose()?,
                    None => None,
                };
                p.statuses.push(ContainerStatus {
                    name: c.str("name")?.to_string(),
                    terminated,
                    last_terminated,
                    restart_count: c.i64("restartCount")?.unwrap_or(0),
                });
            }
        }
        Ok(p)
    }
}

fn read_containers(spec: &Obj<'_>, name: &str) -> Result<Vec<ContainerInfo>, WireError> {
    spec.items(name)?
        .into_iter()
        .map(|(cv, cpath)| {
            let c = Obj::new(cv, cpath)?;
            let mut ci = ContainerInfo { name: c.str("name")?.to_string(), ..Default::default() };
            if let Some(r) = c.obj("resources")? {
                ci.limits = r.string_map("limits")?;
                ci.requests = r.string_map("requests")?;
            }
            Ok(ci)
        })
        .collect()
}

fn time_field(o: &Obj<'_>, name: &str) -> Result<Option<f64>, WireError> {
    let s = o.str(name)?;
    if s.is_empty() {
        return Ok(None);
    }
    units::parse_rfc3339(s).map(Some).map_err(|message| WireError { path: o.sub(name), message })
}

fn read_terminated(t: &Obj<'_>) -> Result<Terminated, WireError> {
    Ok(Terminated {
        reason: t.str("reason")?.to_string(),
        exit_code: t.i64("exitCode")?.unwrap_or(0),
        started_s: time_field(t, "startedAt")?,
        finished_s: time_field(t, "finishedAt")?,
    })
}

/// The parts of a core/v1 Node the extender reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeInfo {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `status.capacity`.
    pub capacity: BTreeMap<String, String>,
    /// `status.allocatable`.
    pub allocatable: BTreeMap<String, String>,
}

impl NodeInfo {
    /// Reads a Node object.
    pub fn from_value(v: &Value, path: &str) -> Result<NodeInfo, WireError> {
        let o = Obj::new(v, path)?;
        let mut n = NodeInfo::default();
        if let Some(m) = o.obj("metadata")? {
            n.name = m.str("name")?.to_string();
            n.resource_version = m.str("resourceVersion")?.to_string();
            n.labels = m.string_map("labels")?;
            n.annotations = m.string_map("annotations")?;
        }
        if let Some(s) = o.obj("status")? {
            n.capacity = s.string_map("capacity")?;
            n.allocatable = s.string_map("allocatable")?;
        }
        Ok(n)
    }
}

/// `ExtenderArgs`: the pod and the candidate nodes, as names (`nodeCacheCapable`) or objects.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtenderArgs {
    /// The pod to place.
    pub pod: PodInfo,
    /// Full node objects, when the extender is not `nodeCacheCapable`.
    pub nodes: Option<Vec<Value>>,
    /// Node names, when it is.
    pub node_names: Option<Vec<String>>,
}

impl ExtenderArgs {
    /// Decodes a filter or prioritize body.
    pub fn from_value(v: &Value) -> Result<ExtenderArgs, WireError> {
        let o = Obj::new(v, "")?;
        let pod = match o.get("Pod") {
            Some(p) => PodInfo::from_value(p, "Pod")?,
            None => return Err(WireError { path: "Pod".into(), message: "missing: the pod to place".into() }),
        };
        let nodes = match o.obj("Nodes")? {
            Some(list) => Some(list.items("items")?.into_iter().map(|(v, _)| v.clone()).collect()),
            None => None,
        };
        let node_names = o.strings("NodeNames")?;
        Ok(ExtenderArgs { pod, nodes, node_names })
    }

    /// The candidate node names: `NodeNames` when given, else the names of `Nodes.items`.
    pub fn candidate_names(&self) -> Result<Vec<String>, WireError> {
        if let Some(n) = &self.node_names {
            return Ok(n.clone());
        }
        let Some(nodes) = &self.nodes else { return Ok(Vec::new()) };
        nodes
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let path = format!("Nodes.items[{i}]");
                let o = Obj::new(v, path)?;
                Ok(match o.obj("metadata")? {
                    Some(m) => m.str("name")?.to_string(),
                    None => String::new(),
                })
            })
            .collect()
    }
}

/// `NodeList` as the filter reply carries it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NodeList {
    /// The node objects, as received.
    pub items: Vec<Value>,
}

/// `ExtenderFilterResult`.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct ExtenderFilterResult {
    /// The kept nodes, when they came as objects.
    #[serde(rename = "Nodes")]
    pub nodes: Option<NodeList>,
    /// The kept node names, when they came as names.
    #[serde(rename = "NodeNames")]
    pub node_names: Option<Vec<String>>,
    /// Node → why it was filtered out (may change: preemption may help).
    #[serde(rename = "FailedNodes")]
    pub failed_nodes: Option<BTreeMap<String, String>>,
    /// Node → why it was filtered out (preemption cannot help).
    #[serde(rename = "FailedAndUnresolvableNodes")]
    pub failed_and_unresolvable_nodes: Option<BTreeMap<String, String>>,
    /// Set when the whole request failed.
    #[serde(rename = "Error")]
    pub error: String,
}

/// `HostPriority`: one entry of the prioritize reply (a JSON array of these).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct HostPriority {
    /// Node name.
    #[serde(rename = "Host")]
    pub host: String,
    /// 0..=[`MAX_EXTENDER_PRIORITY`].
    #[serde(rename = "Score")]
    pub score: i64,
}

/// kube-scheduler's `MaxExtenderPriority`.
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// `ExtenderBindingArgs`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExtenderBindingArgs {
    /// Pod name.
    pub pod_name: String,
    /// Pod namespace.
    pub pod_namespace: String,
    /// Pod UID.
    pub pod_uid: String,
    /// The chosen node.
    pub node: String,
}

impl ExtenderBindingArgs {
    /// Decodes a bind body; the pod's name and the node are required.
    pub fn from_value(v: &Value) -> Result<ExtenderBindingArgs, WireError> {
        let o = Obj::new(v, "")?;
        let a = ExtenderBindingArgs {
            pod_name: o.str("PodName")?.to_string(),
            pod_namespace: o.str("PodNamespace")?.to_string(),
            pod_uid: o.str("PodUID")?.to_string(),
            node: o.str("Node")?.to_string(),
        };
        for (f, v) in [("PodName", &a.pod_name), ("Node", &a.node)] {
            if v.is_empty() {
                return Err(WireError { path: f.into(), message: "missing".into() });
            }
        }
        Ok(a)
    }
}

/// `ExtenderBindingResult`.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct ExtenderBindingResult {
    /// Empty on success.
    #[serde(rename = "Error")]
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_match_case_insensitively_and_null_is_absent() {
        let v = json!({"pod": {"METADATA": {"Name": "p", "namespace": null, "uid": "u1"}}, "nodenames": ["a", "b"], "Nodes": null});
        let a = ExtenderArgs::from_value(&v).unwrap();
        assert_eq!(a.pod.name, "p");
        assert_eq!(a.pod.namespace, "default");
        assert_eq!(a.node_names.as_deref(), Some(&["a".to_string(), "b".to_string()][..]));
        assert!(a.nodes.is_none());
    }

    #[test]
    fn wrong_types_name_the_field() {
        let v = json!({"Pod": {"spec": {"containers": [{"resources": {"limits": {"x": true}}}]}}});
        let e = ExtenderArgs::from_value(&v).unwrap_err();
        assert_eq!(e.path, "Pod.spec.containers[0].resources.limits[\"x\"]");
        let e = ExtenderArgs::from_value(&json!({"Pod": {}, "NodeNames": "a"})).unwrap_err();
        assert_eq!(e.path, "NodeNames");
        let e = ExtenderBindingArgs::from_value(&json!({"PodName": "x"})).unwrap_err();
        assert_eq!(e.path, "Node");
        assert!(ExtenderArgs::from_value(&json!([1])).is_err());
        assert!(ExtenderArgs::from_value(&json!({"NodeNames": []})).is_err());
    }

    #[test]
    fn replies_use_go_names_and_null_for_nil() {
        let r = ExtenderFilterResult { node_names: Some(vec!["a".into()]), ..Default::default() };
        let s = serde_json::to_value(&r).unwrap();
        assert_eq!(
            s,
            json!({"Nodes": null, "NodeNames": ["a"], "FailedNodes": null, "FailedAndUnresolvableNodes": null, "Error": ""})
        );
        let h = serde_json::to_value(vec![HostPriority { host: "a".into(), score: 3 }]).unwrap();
        assert_eq!(h, json!([{"Host": "a", "Score": 3}]));
    }
}
