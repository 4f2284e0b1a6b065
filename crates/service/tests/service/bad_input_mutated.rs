//! Property tests that reach the handlers' checks: each request is built structurally valid
//! (a job the server would queue, a profile it would take) and then changed in exactly one
//! place: a field removed, a value of another type, a negative / zero / fractional / huge /
//! non-JSON number (`NaN`, `1e999`), an empty / very long / non-ASCII / NUL / padded string,
//! an env name that is not one, an unknown extra field, or a key given twice (raw JSON text).
//! Paths and queries of `GET`/`DELETE /v1/jobs/{id}`, `/v1/jobs/{id}/logs` and `/v1/jobs`
//! are arbitrary strings (non-numeric, signed, huge, percent-encoded, repeated parameters).
//!
//! Every reply: no 5xx (a panic fails the case); a 4xx is the API's JSON error with a code and
//! a non-empty message; what the change must get (an unchanged request 2xx, an invalid value
//! 4xx, a still-valid one 2xx) is what it gets; and after a refused request the job and
//! profile lists are exactly as before (nothing half-stored). An accepted job is stored as
//! sent.
//!
//! Each property has its own service (a placement loop not running, as `shared` has) and one
//! runtime; 64 cases each, `PROPTEST_CASES` overrides.

use std::time::Duration;

use axum::http::StatusCode;
use axum::Router;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Value};

use crate::util::call;

// ---------------------------------------------------------------------------------------------
// The JSON tree, its sites, and its text with one change the value cannot hold.

/// One step of a path into a JSON value.
#[derive(Debug, Clone, PartialEq)]
enum Seg {
    Key(String),
    Idx(usize),
}

/// How the body's text differs from the value's own: a node written as raw text (`NaN`), or
/// an object's key written twice, the second time with this raw text.
#[derive(Debug, Clone, Default)]
enum Text {
    #[default]
    Plain,
    Raw(Vec<Seg>, String),
    Dup(Vec<Seg>, String),
}

fn write(v: &Value, at: &mut Vec<Seg>, how: &Text, out: &mut String) {
    if let Text::Raw(p, raw) = how {
        if p == at {
            out.push_str(raw);
            return;
        }
    }
    match v {
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let key = serde_json::to_string(k).unwrap();
                out.push_str(&key);
                out.push(':');
                at.push(Seg::Key(k.clone()));
                write(x, at, how, out);
                if let Text::Dup(p, second) = how {
                    if p == at {
                        out.push(',');
                        out.push_str(&key);
                        out.push(':');
                        out.push_str(second);
                    }
                }
                at.pop();
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                at.push(Seg::Idx(i));
                write(x, at, how, out);
                at.pop();
            }
            out.push(']');
        }
        _ => out.push_str(&v.to_string()),
    }
}

fn text_of(v: &Value, how: &Text) -> String {
    let mut out = String::new();
    write(v, &mut Vec::new(), how, &mut out);
    out
}

/// Every node's path, the root (empty) first.
fn sites(v: &Value, at: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                at.push(Seg::Key(k.clone()));
                sites(x, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(Seg::Idx(i));
                sites(x, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn node<'a>(v: &'a Value, path: &[Seg]) -> &'a Value {
    path.iter().fold(v, |v, s| match s {
        Seg::Key(k) => &v[k.as_str()],
        Seg::Idx(i) => &v[*i],
    })
}

fn node_mut<'a>(v: &'a mut Value, path: &[Seg]) -> &'a mut Value {
    path.iter().fold(v, |v, s| match s {
        Seg::Key(k) => &mut v[k.as_str()],
        Seg::Idx(i) => &mut v[*i],
    })
}

/// The path as a schema key: `jobs[].env.*` (indices and env names dropped).
fn norm(path: &[Seg]) -> String {
    let mut s = String::new();
    let mut in_env = false;
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(if in_env { "*" } else { k });
                in_env = !in_env && k == "env";
            }
            Seg::Idx(_) => {
                s.push_str("[]");
                in_env = false;
            }
        }
    }
    s
}

// ---------------------------------------------------------------------------------------------
// What each field is: from docs/openapi.yaml, validate.rs and AppProfile::validate.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Target {
    Job,
    Batch,
    Profile,
}

/// The kinds of string field, by what they allow.
#[derive(Debug, Clone, Copy, PartialEq)]
enum S {
    /// 1-128 of `[A-Za-z0-9._-]`.
    AppName,
    /// `command[0]`: must be found on PATH.
    Program,
    /// Any string without NUL up to 16 KiB.
    Arg,
    /// As an argument.
    EnvValue,
    /// Any string up to 16 KiB (a NUL is allowed).
    Params,
    /// Any string.
    Free,
    /// `hpc`, `ml` or `unknown`.
    Kind,
}

/// A number field: from `min` to `max`, an integer when `int`.
#[derive(Debug, Clone, Copy)]
struct N {
    min: f64,
    max: f64,
    int: bool,
}

#[derive(Debug, Clone, Copy)]
enum Ty {
    Str(S),
    Num(N),
    Arr,
    Env,
    /// An object; `strict`: every unknown field refused, even a null one (serde's
    /// `deny_unknown_fields`); else a null unknown field counts as absent (profiles).
    Obj {
        strict: bool,
    },
}

#[derive(Debug, Clone, Copy)]
struct Field {
    required: bool,
    nullable: bool,
    ty: Ty,
}

const fn f(required: bool, nullable: bool, ty: Ty) -> Field {
    Field { required, nullable, ty }
}

const ANY: f64 = f64::INFINITY;

fn job_field(rel: &str, first: bool) -> Field {
    let size = N { min: 0.0, max: ANY, int: false };
    match rel {
        "" => f(true, false, Ty::Obj { strict: true }),
        "app" => f(true, false, Ty::Str(S::AppName)),
        "command" => f(true, false, Ty::Arr),
        "command[]" => f(true, false, Ty::Str(if first { S::Program } else { S::Arg })),
        "env" => f(false, false, Ty::Env),
        "env.*" => f(false, false, Ty::Str(S::EnvValue)),
        "input_size_mb" => f(false, true, Ty::Num(size)),
        "params" => f(false, true, Ty::Str(S::Params)),
        other => panic!("no job field `{other}`"),
    }
}

/// The largest GPU of the test service (titanxp:1), MiB: a profile past it is refused.
const GPU_MIB: f64 = 12_288.0;

fn profile_field(rel: &str) -> Field {
    let pct = N { min: 0.0, max: 100.0, int: false };
    let obj = Ty::Obj { strict: false };
    match rel {
        "" | "app" | "samples[]" => f(true, false, obj),
        "app.name" => f(true, false, Ty::Str(S::AppName)),
        "app.kind" => f(false, false, Ty::Str(S::Kind)),
        "app.input_size_mb" => f(false, true, Ty::Num(N { min: 0.0, max: ANY, int: false })),
        "app.params" => f(false, true, Ty::Str(S::Params)),
        "interval_s" => f(true, false, Ty::Num(N { min: 1e-6, max: 3600.0, int: false })),
        "recorded_on" => f(false, true, obj),
        "recorded_on.node" | "recorded_on.gpu_name" => f(true, false, Ty::Str(S::Free)),
        "recorded_on.architecture" => f(false, false, Ty::Str(S::Free)),
        "recorded_on.memory_mib" => f(true, false, Ty::Num(N { min: 0.0, max: 1e7, int: false })),
        "recorded_on.cores" => f(false, false, Ty::Num(N { min: 0.0, max: u32::MAX as f64, int: true })),
        "recorded_on.pcie_gbps" => f(false, false, Ty::Num(N { min: 0.0, max: 1e4, int: false })),
        "samples" => f(true, false, Ty::Arr),
        "samples[].gpu_util_pct" | "samples[].sm_pct" => f(true, false, Ty::Num(pct)),
        "samples[].gpu_mem_mib" => f(true, false, Ty::Num(N { min: 0.0, max: GPU_MIB, int: false })),
        "samples[].pcie_mbps" => {
            f(true, false, Ty::Num(N { min: 0.0, max: dqngpu_model::gpu::max_pcie_mbps(), int: false }))
        }
        other => panic!("no profile field `{other}`"),
    }
}

fn field(target: Target, path: &[Seg]) -> Field {
    let n = norm(path);
    let first = matches!(path.last(), Some(Seg::Idx(0)));
    match target {
        Target::Job => job_field(&n, first),
        Target::Batch => match n.as_str() {
            "" => f(true, false, Ty::Obj { strict: true }),
            "jobs" => f(true, false, Ty::Arr),
            "jobs[]" => job_field("", first),
            rest => job_field(rest.strip_prefix("jobs[].").expect("a job's field"), first),
        },
        Target::Profile => profile_field(&n),
    }
}

// ---------------------------------------------------------------------------------------------
// The changes, and what each must get.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    Accepted,
    Refused,
    Either,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum StrOp {
    Empty,
    Long,
    NonAscii,
    Nul,
    Padded,
}

impl StrOp {
    const ALL: [StrOp; 5] = [StrOp::Empty, StrOp::Long, StrOp::NonAscii, StrOp::Nul, StrOp::Padded];

    fn apply(self, cur: &str) -> String {
        match self {
            StrOp::Empty => String::new(),
            // Past every limit: 16 KiB for arguments, env values and params; 128 for names.
            StrOp::Long => format!("{cur}{}", "x\u{e9}".repeat(9000)),
            StrOp::NonAscii => "\u{e9}t\u{e9}-\u{65e5}\u{672c}-\u{1f680}".to_string(),
            StrOp::Nul => format!("{cur}\u{0}x"),
            StrOp::Padded => format!(" {cur} "),
        }
    }

    fn expect(self, s: S) -> Expect {
        use Expect::{Accepted, Refused};
        match (s, self) {
            (S::AppName | S::Program | S::Kind, _) => Refused,
            (S::Free, _) => Accepted,
            (_, StrOp::Long) => Refused,
            (S::Arg | S::EnvValue, StrOp::Nul) => Refused,
            _ => Accepted,
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// The node removed (the root: an empty body).
    Remove,
    /// The node replaced by this value (another type, or another number).
    Set(Value),
    /// The node written as this text, which is not a JSON number.
    Raw(&'static str),
    /// A string changed.
    Str(StrOp),
    /// An env variable renamed to this (not a valid or allowed name).
    Rename(String),
    /// An unknown field added to an object.
    Extra(String, Value),
    /// The node's key given again, with this value.
    Dup(Value),
}

/// Values of every JSON type, for a field of another.
fn retypes() -> Vec<Value> {
    vec![
        json!(null),
        json!(true),
        json!(7),
        json!(-2.5),
        json!("x"),
        json!([]),
        json!(["true"]),
        json!({}),
        json!({"a": 1}),
    ]
}

fn same_type(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// Numbers a field may be set to: negative, zero, fractional, huge.
const NUMBERS: [f64; 9] = [-1.0, -1e-3, -1e300, 0.0, 0.5, 2.75, 1e-7, 1e300, 4_294_967_296.0];
/// Texts that are not JSON numbers (or not ones an f64 holds).
const NOT_NUMBERS: [&str; 11] =
    ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "01", ".5", "1.", "0x10", "+1", "1e"];
/// Env names a job may not set.
const BAD_ENV_NAMES: [&str; 8] =
    ["", "1BAD", "A=B", "A B", "\u{e9}T\u{e9}", "CUDA_VISIBLE_DEVICES", "CUDA_MPS_PIPE_DIRECTORY", "DQNGPU_JOB_ID"];
/// Unknown field names (some near a real one).
const EXTRA_NAMES: [&str; 5] = ["cwd", "", "Name", "sample", "interval"];

/// Every change that can be made at `path` of `v`, by kind (each kind about as likely).
fn ops(target: Target, v: &Value, path: &[Seg]) -> Vec<Vec<Op>> {
    let n = node(v, path);
    let fd = field(target, path);
    let parent = &path[..path.len().saturating_sub(1)];
    let parent_ty = (!path.is_empty()).then(|| field(target, parent).ty);
    let mut out = vec![vec![Op::Remove], retypes().into_iter().filter(|c| !same_type(c, n)).map(Op::Set).collect()];
    match fd.ty {
        Ty::Num(_) => {
            out.push(NUMBERS.iter().map(|x| Op::Set(json!(x))).collect());
            out.push(NOT_NUMBERS.iter().map(|t| Op::Raw(t)).collect());
        }
        Ty::Str(_) => out.push(StrOp::ALL.iter().map(|s| Op::Str(*s)).collect()),
        Ty::Obj { .. } => out.push(
            EXTRA_NAMES
                .iter()
                .filter(|k| n.get(**k).is_none())
                .flat_map(|name| [json!(null), json!(1), json!("x")].map(|x| Op::Extra(name.to_string(), x)))
                .collect(),
        ),
        Ty::Arr | Ty::Env => {}
    }
    if let Some(Ty::Env) = parent_ty {
        out.push(BAD_ENV_NAMES.iter().map(|k| Op::Rename(k.to_string())).collect());
    }
    if matches!(path.last(), Some(Seg::Key(_))) {
        let other = retypes().into_iter().find(|c| !same_type(c, n)).unwrap();
        out.push(vec![Op::Dup(n.clone()), Op::Dup(other)]);
    }
    out
}

/// What a number `x` in a field `n` must get.
fn number_expect(n: N, x: f64) -> Expect {
    if x < n.min || x > n.max || (n.int && x.fract() != 0.0) {
        Expect::Refused
    } else {
        Expect::Accepted
    }
}

fn expect(target: Target, v: &Value, path: &[Seg], op: &Op) -> Expect {
    use Expect::{Accepted, Either, Refused};
    let fd = field(target, path);
    let parent = &path[..path.len().saturating_sub(1)];
    match op {
        Op::Remove => match path.last() {
            None => Refused,
            // Arrays here hold at least one: removing the only one is refused.
            Some(Seg::Idx(i)) => {
                if node(v, parent).as_array().unwrap().len() == 1 {
                    Refused
                } else if *i == 0 && norm(parent).ends_with("command") {
                    // The next argument becomes the program.
                    Either
                } else {
                    Accepted
                }
            }
            Some(Seg::Key(_)) => {
                if fd.required {
                    Refused
                } else {
                    Accepted
                }
            }
        },
        Op::Set(x) => match (fd.ty, x.as_f64()) {
            // An integer field takes no number written as a float (`0.0`), as serde reads it.
            (Ty::Num(n), Some(_)) if n.int && x.is_f64() => Refused,
            (Ty::Num(n), Some(x)) => number_expect(n, x),
            _ if x.is_null() && fd.nullable => Accepted,
            _ => Refused,
        },
        Op::Raw(_) => Refused,
        Op::Str(s) => match fd.ty {
            Ty::Str(k) => s.expect(k),
            _ => unreachable!(),
        },
        Op::Rename(_) => Refused,
        Op::Extra(_, x) => match fd.ty {
            Ty::Obj { strict: false } if x.is_null() => Accepted,
            _ => Refused,
        },
        // A key given twice is ambiguous: refused, as `env` and every field are.
        Op::Dup(_) => Refused,
    }
}

/// One request: its body's text, what it must get, and what was changed.
#[derive(Debug, Clone)]
struct Case {
    body: String,
    expect: Expect,
    what: String,
    /// The value sent (the change applied, but not a duplicated key or a raw token).
    sent: Value,
}

fn mutate(target: Target, base: &Value, changed: bool, site: Index, (kind, op): (Index, Index)) -> Case {
    if !changed {
        return Case { body: base.to_string(), expect: Expect::Accepted, what: "unchanged".into(), sent: base.clone() };
    }
    let mut all = Vec::new();
    sites(base, &mut Vec::new(), &mut all);
    let path = site.get(&all).clone();
    let kinds = ops(target, base, &path);
    let op = op.get(kind.get::<Vec<Op>>(&kinds)).clone();
    let expect = expect(target, base, &path, &op);
    let what = format!("{op:?} at {}", norm(&path));
    let mut v = base.clone();
    let mut how = Text::Plain;
    match &op {
        Op::Remove => match path.split_last() {
            None => return Case { body: String::new(), expect, what, sent: Value::Null },
            Some((Seg::Key(k), parent)) => {
                node_mut(&mut v, parent).as_object_mut().unwrap().remove(k);
            }
            Some((Seg::Idx(i), parent)) => {
                node_mut(&mut v, parent).as_array_mut().unwrap().remove(*i);
            }
        },
        Op::Set(x) => *node_mut(&mut v, &path) = x.clone(),
        Op::Raw(t) => how = Text::Raw(path.clone(), t.to_string()),
        Op::Str(s) => {
            let n = node_mut(&mut v, &path);
            *n = Value::String(s.apply(n.as_str().unwrap()));
        }
        Op::Rename(name) => {
            let Some((Seg::Key(k), parent)) = path.split_last() else { unreachable!() };
            let m = node_mut(&mut v, parent).as_object_mut().unwrap();
            let x = m.remove(k).unwrap();
            m.insert(name.clone(), x);
        }
        Op::Extra(name, x) => {
            node_mut(&mut v, &path).as_object_mut().unwrap().insert(name.clone(), x.clone());
        }
        Op::Dup(x) => how = Text::Dup(path.clone(), x.to_string()),
    }
    Case { body: text_of(&v, &how), expect, what, sent: v }
}

// ---------------------------------------------------------------------------------------------
// Valid requests.

fn app_name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._-]{1,24}"
}

/// Short text of any characters but control ones (no NUL).
fn text() -> impl Strategy<Value = String> {
    "\\PC{0,12}"
}

fn env_name() -> impl Strategy<Value = String> {
    "[A-Z_][A-Z0-9_]{0,10}".prop_filter("not a name the service sets, nor PATH", |k| {
        !(k == "PATH" || k.starts_with("CUDA_") || k.starts_with("DQNGPU_"))
    })
}

fn valid_job() -> impl Strategy<Value = Value> {
    (
        app_name(),
        prop::sample::select(vec!["true", "sh", "ls", "/bin/sh"]),
        prop::collection::vec(text(), 0..3),
        prop::option::of(prop::collection::btree_map(env_name(), text(), 0..3)),
        prop::option::of(prop_oneof![Just(0.0), 0.0..1e6f64]),
        prop::option::of(text()),
    )
        .prop_map(|(app, prog, args, env, size, params)| {
            let mut command = vec![prog.to_string()];
            command.extend(args);
            let j = json!({ "app": app, "command": command });
            with_optional(
                j,
                [
                    ("env", env.map(|e| json!(e))),
                    ("input_size_mb", size.map(Value::from)),
                    ("params", params.map(Value::from)),
                ],
            )
        })
}

/// `v` with each optional field set where it has a value (left out where it has none).
fn with_optional<const N: usize>(mut v: Value, fields: [(&str, Option<Value>); N]) -> Value {
    for (key, value) in fields {
        if let Some(value) = value {
            v[key] = value;
        }
    }
    v
}

fn valid_batch() -> impl Strategy<Value = Value> {
    prop::collection::vec(valid_job(), 1..4).prop_map(|jobs| json!({ "jobs": jobs }))
}

fn sample() -> impl Strategy<Value = Value> {
    (0.0..=100.0f64, 0.0..=12_000.0f64, 0.0..=100.0f64, 0.0..=1_000.0f64)
        .prop_map(|(u, m, s, p)| json!({ "gpu_util_pct": u, "gpu_mem_mib": m, "sm_pct": s, "pcie_mbps": p }))
}

fn recorded_on() -> impl Strategy<Value = Value> {
    (
        text(),
        text(),
        prop::option::of(text()),
        0.0..1e5f64,
        prop::option::of(0u32..10_000),
        prop::option::of(0.0..64.0f64),
    )
        .prop_map(|(node, gpu, arch, mem, cores, pcie)| {
            let r = json!({ "node": node, "gpu_name": gpu, "memory_mib": mem });
            with_optional(
                r,
                [
                    ("architecture", arch.map(Value::from)),
                    ("cores", cores.map(Value::from)),
                    ("pcie_gbps", pcie.map(Value::from)),
                ],
            )
        })
}

fn valid_profile() -> impl Strategy<Value = Value> {
    (
        app_name(),
        prop::option::of(prop::sample::select(vec!["hpc", "ml", "unknown"])),
        prop::option::of(0.0..1e6f64),
        prop::option::of(text()),
        prop_oneof![Just(1.0), 1e-3..100.0f64],
        prop::collection::vec(sample(), 1..5),
        prop::option::of(recorded_on()),
    )
        .prop_map(|(name, kind, size, params, interval, samples, on)| {
            let app = json!({ "name": name });
            let app = with_optional(
                app,
                [
                    ("kind", kind.map(Value::from)),
                    ("input_size_mb", size.map(Value::from)),
                    ("params", params.map(Value::from)),
                ],
            );
            with_optional(json!({ "app": app, "interval_s": interval, "samples": samples }), [("recorded_on", on)])
        })
}

/// A valid request, and the change: none about one case in eight.
fn mutated(base: impl Strategy<Value = Value>) -> impl Strategy<Value = (Value, bool, Index, (Index, Index))> {
    (base, prop::bool::weighted(0.875), any::<Index>(), any::<(Index, Index)>())
}

// ---------------------------------------------------------------------------------------------
// The checks.

fn cases() -> Config {
    Config { cases: dqngpu_model::testing::cases_or(64), failure_persistence: None, ..Config::default() }
}

/// A service of its own on a fresh data dir, its placement loop not running, and a runtime.
fn service() -> (tempfile::TempDir, Router, tokio::runtime::Runtime) {
    let dir = tempfile::tempdir().unwrap();
    let router = super::router_without_loop(dir.path(), Duration::from_secs(10));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    (dir, router, rt)
}

fn short(s: &str) -> String {
    if s.len() <= 400 {
        return s.to_string();
    }
    let cut = (0..=400).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0);
    format!("{}... ({} bytes)", &s[..cut], s.len())
}

/// No 5xx, and a 4xx is `{"error": {"code": .., "message": ..}}` with a message.
fn reply_is_sound(s: StatusCode, v: &Value, req: &str) -> Result<(), TestCaseError> {
    prop_assert!(s.is_success() || s.is_client_error(), "{s} for {}: {v}", short(req));
    if s.is_client_error() {
        prop_assert!(v["error"]["code"].as_str().is_some_and(|c| !c.is_empty()), "{s} for {}: {v}", short(req));
        prop_assert!(v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{s} for {}: {v}", short(req));
    }
    Ok(())
}

/// Every job and every profile, as the API lists them.
async fn lists(r: &Router) -> (Value, Value) {
    let (s, jobs) = call(r, "GET", "/v1/jobs?limit=10000", None, &[]).await;
    assert_eq!(s, StatusCode::OK, "{jobs}");
    let (s, profiles) = call(r, "GET", "/v1/profiles", None, &[]).await;
    assert_eq!(s, StatusCode::OK, "{profiles}");
    (jobs, profiles)
}

fn job_count(jobs: &Value) -> usize {
    jobs["jobs"].as_array().map_or(0, Vec::len)
}

/// The stored job is the one sent.
fn stored_as_sent(job: &Value, sent: &Value) -> Result<(), TestCaseError> {
    prop_assert_eq!(&job["app"], &sent["app"]);
    prop_assert_eq!(&job["command"], &sent["command"]);
    let env = if sent["env"].is_null() { json!({}) } else { sent["env"].clone() };
    prop_assert_eq!(&job["env"], &env);
    prop_assert_eq!(job["input_size_mb"].as_f64(), sent["input_size_mb"].as_f64());
    prop_assert_eq!(&job["params"], &sent["params"]);
    prop_assert_eq!(job["state"].as_str(), Some("queued"));
    Ok(())
}

/// Sends one changed request and checks the reply and what was stored.
async fn post_case(r: &Router, target: Target, case: &Case) -> Result<(), TestCaseError> {
    let uri = match target {
        Target::Job => "/v1/jobs",
        Target::Batch => "/v1/jobs/batch",
        Target::Profile => "/v1/profiles",
    };
    let req = format!("POST {uri} ({}) {}", case.what, case.body);
    let before = lists(r).await;
    let (s, v) = call(r, "POST", uri, Some(&case.body), &[]).await;
    reply_is_sound(s, &v, &req)?;
    match case.expect {
        Expect::Accepted => prop_assert!(s.is_success(), "refused {s} {v}: {}", short(&req)),
        Expect::Refused => prop_assert!(s.is_client_error(), "accepted {s} {v}: {}", short(&req)),
        Expect::Either => {}
    }
    let after = lists(r).await;
    if !s.is_success() {
        prop_assert!(after == before, "refused with {s} {v} but the lists changed: {}", short(&req));
    } else {
        match target {
            Target::Job => {
                prop_assert_eq!(s, StatusCode::CREATED, "{}: {}", v, short(&req));
                prop_assert_eq!(job_count(&after.0), job_count(&before.0) + 1, "{}", short(&req));
                let (s, job) = call(r, "GET", &format!("/v1/jobs/{}", v["id"]), None, &[]).await;
                prop_assert_eq!(s, StatusCode::OK, "{}", job);
                stored_as_sent(&job, &case.sent)?;
                prop_assert_eq!(&after.1, &before.1);
            }
            Target::Batch => {
                prop_assert_eq!(s, StatusCode::CREATED, "{}: {}", v, short(&req));
                let sent = case.sent["jobs"].as_array().unwrap();
                let ids = v["jobs"].as_array().unwrap();
                prop_assert_eq!(ids.len(), sent.len());
                prop_assert_eq!(job_count(&after.0), job_count(&before.0) + sent.len(), "{}", short(&req));
                for (id, job) in ids.iter().zip(sent) {
                    let (s, stored) = call(r, "GET", &format!("/v1/jobs/{}", id["id"]), None, &[]).await;
                    prop_assert_eq!(s, StatusCode::OK, "{}", stored);
                    stored_as_sent(&stored, job)?;
                }
                prop_assert_eq!(&after.1, &before.1);
            }
            Target::Profile => {
                prop_assert_eq!(s, StatusCode::CREATED, "{}: {}", v, short(&req));
                let name = v["app"].as_str().unwrap_or_default();
                let listed = after.1["profiles"].as_array().unwrap().iter().find(|p| p["app"] == name);
                let listed = listed.ok_or_else(|| TestCaseError::fail(format!("`{name}` not listed: {}", after.1)))?;
                // Taken as sent.
                if case.expect == Expect::Accepted {
                    prop_assert_eq!(case.sent["app"]["name"].as_str(), Some(name));
                    let n = case.sent["samples"].as_array().unwrap().len() as u64;
                    prop_assert_eq!(listed["samples"].as_u64(), Some(n));
                    prop_assert_eq!(listed["interval_s"].as_f64(), case.sent["interval_s"].as_f64());
                }
                prop_assert_eq!(&after.0, &before.0);
            }
        }
    }
    let (s, _) = call(r, "GET", "/healthz", None, &[]).await;
    prop_assert_eq!(s, StatusCode::OK);
    Ok(())
}

fn run_posts(target: Target, base: impl Strategy<Value = Value>) {
    let (_dir, router, rt) = service();
    let mut runner = TestRunner::new(cases());
    let result = runner.run(&mutated(base), |(base, changed, site, op)| {
        let case = mutate(target, &base, changed, site, op);
        rt.block_on(post_case(&router, target, &case))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn a_job_with_one_thing_wrong_is_refused_whole_and_a_valid_one_queued() {
    run_posts(Target::Job, valid_job());
}

#[test]
fn a_batch_with_one_thing_wrong_is_refused_whole_and_a_valid_one_queued() {
    run_posts(Target::Batch, valid_batch());
}

#[test]
fn a_profile_with_one_thing_wrong_is_refused_and_a_valid_one_taken() {
    run_posts(Target::Profile, valid_profile());
}

// ---------------------------------------------------------------------------------------------
// Paths and queries.

/// A piece of a path segment or a query value: numbers of every sign and size, words,
/// percent-encodings (valid, invalid, of a `/`, of non-UTF-8).
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,22}",
        prop::sample::select(vec![
            "0",
            "1",
            "2",
            "3",
            "5",
            "6",
            "7",
            "-1",
            "-0",
            "+1",
            "00",
            "10000",
            "10001",
            "4294967295",
            "4294967296",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999999",
            "1.5",
            "1e3",
            "0x1",
            "abc",
            "%31",
            "%2D1",
            "%2B1",
            "%30%31",
            "%FF",
            "%00",
            "%",
            "%zz",
            "%2F",
            "%26",
            "%3D",
            "%C3%A9",
            "%E2%82%AC",
            "queued",
            "running",
            "cancelled",
            "QUEUED",
            "",
            "~",
            "..",
            ".",
            "+",
            "NaN",
        ])
        .prop_map(String::from),
        "[A-Za-z0-9._~!$'()*+,;:@-]{0,10}",
    ]
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        // Often a job's id (1 to 7 exist), so GET and DELETE reach a job.
        1 => (1u64..10).prop_map(|id| id.to_string()),
        2 => prop::collection::vec(piece(), 1..3).prop_map(|p| p.concat()),
    ]
}

/// A query: parameters named as the API's or not, repeated or not, percent-encoded or not.
fn query() -> impl Strategy<Value = String> {
    let name = prop::sample::select(vec!["limit", "after", "state", "lim%69t", "%61fter", "foo", "", "LIMIT"]);
    let param = (name, prop::option::of(segment())).prop_map(|(n, v)| match v {
        Some(v) => format!("{n}={v}"),
        None => n.to_string(),
    });
    prop::collection::vec(param, 0..4).prop_map(|ps| ps.join("&"))
}

/// Percent-decodes as a URL's path is (an invalid escape kept as it is).
fn percent_decode(s: &str, plus_is_space: bool) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(if plus_is_space && b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    out
}

/// A query as `application/x-www-form-urlencoded` reads it: pairs, `+` a space.
fn form_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let d = |s: &str| String::from_utf8_lossy(&percent_decode(s, true)).into_owned();
            (d(k), d(v))
        })
        .collect()
}

/// What `GET /v1/jobs?q` must answer: Ok((state, after, limit)) or a 400.
fn list_query(q: &str) -> Result<(Option<String>, u64, usize), ()> {
    let (mut state, mut after, mut limit) = (None, None, None);
    for (k, v) in form_pairs(q) {
        let slot = match k.as_str() {
            "state" => &mut state,
            "after" => &mut after,
            "limit" => &mut limit,
            _ => return Err(()),
        };
        if slot.replace(v).is_some() {
            return Err(());
        }
    }
    let state = match state.as_deref() {
        None | Some("") => None,
        Some(s @ ("queued" | "running" | "succeeded" | "failed" | "cancelled")) => Some(s.to_string()),
        Some(_) => return Err(()),
    };
    let after = after.map_or(Ok(0), |a| a.parse::<u64>().map_err(drop))?;
    let limit = limit.map_or(Ok(1000), |l| l.parse::<usize>().map_err(drop))?;
    if !(1..=10_000).contains(&limit) {
        return Err(());
    }
    Ok((state, after, limit))
}

/// A path's id as axum's `Path<u64>` reads it: Some(id), or None (400).
fn path_id(seg: &str) -> Option<u64> {
    String::from_utf8(percent_decode(seg, false)).ok()?.parse().ok()
}

#[derive(Debug, Clone)]
enum PathReq {
    Job { delete: bool, seg: String },
    Logs { seg: String, attempt: Option<String> },
    List { delete: bool, query: String },
}

fn path_req() -> impl Strategy<Value = PathReq> {
    prop_oneof![
        1 => (any::<bool>(), segment()).prop_map(|(delete, seg)| PathReq::Job { delete, seg }),
        1 => (segment(), prop::option::of(segment())).prop_map(|(seg, attempt)| PathReq::Logs { seg, attempt }),
        3 => (prop::bool::weighted(0.1), query()).prop_map(|(delete, query)| PathReq::List { delete, query }),
    ]
}

/// Checks one request against what the store holds (`jobs`: every job, before it).
async fn path_case(r: &Router, req: &PathReq) -> Result<(), TestCaseError> {
    let (before, profiles) = lists(r).await;
    let all = before["jobs"].as_array().unwrap().clone();
    let find = |id: u64| all.iter().find(|j| j["id"].as_u64() == Some(id));
    let (method, uri) = match req {
        PathReq::Job { delete, seg } => (if *delete { "DELETE" } else { "GET" }, format!("/v1/jobs/{seg}")),
        PathReq::Logs { seg, attempt: Some(a) } => ("GET", format!("/v1/jobs/{seg}/logs?attempt={a}")),
        PathReq::Logs { seg, attempt: None } => ("GET", format!("/v1/jobs/{seg}/logs")),
        PathReq::List { delete, query } => (if *delete { "DELETE" } else { "GET" }, format!("/v1/jobs?{query}")),
    };
    let what = format!("{method} {uri}");
    let (s, v) = call(r, method, &uri, None, &[]).await;
    reply_is_sound(s, &v, &what)?;
    let mut cancelled = None;
    match req {
        PathReq::Job { seg, .. } if seg.is_empty() => {
            prop_assert_eq!(s, StatusCode::NOT_FOUND, "{}: {}", what, v);
        }
        PathReq::Job { delete, seg } => match (path_id(seg), *delete) {
            (None, _) => prop_assert_eq!(s, StatusCode::BAD_REQUEST, "{}: {}", what, v),
            (Some(id), false) => match find(id) {
                Some(job) => {
                    prop_assert_eq!(s, StatusCode::OK, "{}: {}", what, v);
                    prop_assert_eq!(v["id"].as_u64(), Some(id));
                    prop_assert_eq!(&v["state"], &job["state"]);
                }
                None => prop_assert_eq!(s, StatusCode::NOT_FOUND, "{}: {}", what, v),
            },
            (Some(id), true) => match find(id).map(|j| j["state"].as_str() == Some("queued")) {
                Some(true) => {
                    prop_assert_eq!(s, StatusCode::OK, "{}: {}", what, v);
                    cancelled = Some(id);
                }
                Some(false) => prop_assert_eq!(s, StatusCode::CONFLICT, "{}: {}", what, v),
                None => prop_assert_eq!(s, StatusCode::NOT_FOUND, "{}: {}", what, v),
            },
        },
        PathReq::Logs { seg, attempt } => {
            // No job here has run: there are no logs to give.
            let bad_attempt =
                attempt.as_deref().is_some_and(|a| form_pairs(&format!("attempt={a}"))[0].1.parse::<u32>().is_err());
            // `/v1/jobs//logs` is the route with an empty id: a 400 as any other bad one.
            let want =
                if path_id(seg).is_none() || bad_attempt { StatusCode::BAD_REQUEST } else { StatusCode::NOT_FOUND };
            prop_assert_eq!(s, want, "{}: {}", what, v);
        }
        PathReq::List { delete: true, .. } => {
            prop_assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED, "{}: {}", what, v);
        }
        PathReq::List { delete: false, query } => match list_query(query) {
            Err(()) => prop_assert_eq!(s, StatusCode::BAD_REQUEST, "{}: {}", what, v),
            Ok((state, after, limit)) => {
                prop_assert_eq!(s, StatusCode::OK, "{}: {}", what, v);
                let want: Vec<u64> = all
                    .iter()
                    .filter(|j| state.as_deref().is_none_or(|st| j["state"] == st))
                    .filter_map(|j| j["id"].as_u64())
                    .filter(|id| *id > after)
                    .collect();
                let got: Vec<u64> = v["jobs"].as_array().unwrap().iter().filter_map(|j| j["id"].as_u64()).collect();
                prop_assert_eq!(&got[..], &want[..want.len().min(limit)], "{}", what);
                let next = if want.len() > limit { json!(want[limit - 1]) } else { json!(null) };
                prop_assert_eq!(&v["next_after"], &next, "{}", what);
            }
        },
    }
    let (after, profiles_after) = lists(r).await;
    prop_assert_eq!(&profiles_after, &profiles);
    let mut expected = before;
    if let Some(id) = cancelled {
        // The one change a 2xx DELETE makes: that job cancelled.
        let stored = after["jobs"].as_array().unwrap().iter().find(|j| j["id"].as_u64() == Some(id)).cloned();
        prop_assert_eq!(stored.as_ref().map(|j| j["state"].clone()), Some(json!("cancelled")));
        let job = expected["jobs"].as_array_mut().unwrap().iter_mut().find(|j| j["id"].as_u64() == Some(id)).unwrap();
        *job = stored.unwrap();
    }
    prop_assert!(after == expected, "{what} ({s}) changed the jobs: {after} (was {expected})");
    Ok(())
}

#[test]
fn any_job_path_or_list_query_gets_a_json_answer_and_changes_nothing_it_should_not() {
    let (_dir, router, rt) = service();
    // Jobs 1 to 7 (no placement loop: they stay queued until a DELETE cancels one).
    rt.block_on(async {
        for i in 0..7 {
            crate::util::submit(&router, &format!("app{i}"), &["true"]).await;
        }
    });
    let mut runner = TestRunner::new(cases());
    if let Err(e) = runner.run(&path_req(), |req| rt.block_on(path_case(&router, &req))) {
        panic!("{e}");
    }
}

// ---------------------------------------------------------------------------------------------
// Defects the properties found (session 29), fixed: each case as it was taken.

/// Each (URI, body) `POST`ed to a fresh service; those not refused (4xx), described.
fn taken_of(cases: &[(&str, String)]) -> Vec<String> {
    let (_dir, r, rt) = service();
    rt.block_on(async {
        let mut taken = Vec::new();
        for (uri, body) in cases {
            let (s, v) = call(&r, "POST", uri, Some(body), &[]).await;
            if !s.is_client_error() {
                taken.push(format!("{s} {v} for POST {uri} {body}"));
            }
        }
        taken
    })
}

/// `POST /v1/profiles` read the body into a `serde_json::Value` first, which keeps the last of
/// a key given twice without a word (`POST /v1/jobs` refused it: serde's "duplicate field").
/// A profile whose interval was sent as 0 and then 1 was taken with 1 (201). Now the typed
/// read sees the raw text ([`dqngpu_service::body::StrictJson`]).
#[test]
fn a_profile_key_given_twice_is_refused() {
    let sample = r#"{"gpu_util_pct":10,"gpu_mem_mib":100,"sm_pct":10,"pcie_mbps":1}"#;
    let taken = taken_of(&[
        ("/v1/profiles", format!(r#"{{"app":{{"name":"p"}},"interval_s":0,"interval_s":1,"samples":[{sample}]}}"#)),
        ("/v1/profiles", format!(r#"{{"app":{{"name":"p","name":"q"}},"interval_s":1,"samples":[{sample}]}}"#)),
        ("/v1/profiles", r#"{"app":{"name":"p"},"interval_s":1,"samples":[{"gpu_util_pct":-5,"gpu_util_pct":10,"gpu_mem_mib":100,"sm_pct":10,"pcie_mbps":1}]}"#.to_string()),
    ]);
    assert!(taken.is_empty(), "taken:\n{}", taken.join("\n"));
}

/// serde reads a struct from a JSON array of its fields in order, so an object sent as an
/// array was taken where the API says an object: a profile's `app` as `["true"]` (201, app
/// `true`), a whole job as `["a", ["true"]]` (201 on `POST /v1/jobs`, and inside a batch), a
/// sample as `[10, 100, 10, 1]`. Now refused (422, naming where).
#[test]
fn an_object_sent_as_an_array_is_refused() {
    let sample = r#"{"gpu_util_pct":10,"gpu_mem_mib":100,"sm_pct":10,"pcie_mbps":1}"#;
    let taken = taken_of(&[
        ("/v1/profiles", format!(r#"{{"app":["true"],"interval_s":1,"samples":[{sample}]}}"#)),
        ("/v1/profiles", r#"{"app":{"name":"p"},"interval_s":1,"samples":[[10,100,10,1]]}"#.to_string()),
        ("/v1/jobs", r#"["a",["true"]]"#.to_string()),
        ("/v1/jobs/batch", r#"{"jobs":[["a",["true"]]]}"#.to_string()),
    ]);
    assert!(taken.is_empty(), "taken:\n{}", taken.join("\n"));
}
