//! The shipped manifests (`deploy/kubernetes/`), parsed as kube-scheduler reads them.

use serde_yaml::Value;

fn manifest(name: &str) -> String {
    let path = format!("{}/../../deploy/kubernetes/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The KubeSchedulerConfiguration inside the ConfigMap of `scheduler-config.yaml`.
fn scheduler_config() -> Value {
    let cm: Value = serde_yaml::from_str(&manifest("scheduler-config.yaml")).unwrap();
    let text = cm["data"]["config.yaml"].as_str().expect("data.config.yaml");
    serde_yaml::from_str(text).unwrap()
}

#[test]
fn the_extender_manages_hamis_parameters_and_kube_scheduler_ignores_them() {
    let cfg = scheduler_config();
    assert_eq!(cfg["kind"], Value::from("KubeSchedulerConfiguration"));
    let extenders = cfg["extenders"].as_sequence().unwrap();
    assert_eq!(extenders.len(), 1);
    let managed: Vec<(String, bool)> = extenders[0]["managedResources"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap().to_string(), r["ignoredByScheduler"].as_bool().unwrap()))
        .collect();
    let want = [
        ("aliyun.com/gpu-mem", false),
        ("nvidia.com/gpu", false),
        ("nvidia.com/gpumem", true),
        ("nvidia.com/gpucores", true),
        ("nvidia.com/gpumem-percentage", true),
        ("nvidia.com/priority", true),
    ];
    let want: Vec<(String, bool)> = want.iter().map(|(n, i)| (n.to_string(), *i)).collect();
    assert_eq!(managed, want);
    // The resource names the extender reads are the ones listed.
    for name in [dqngpu_k8s::devices::HAMI_MEM, dqngpu_k8s::devices::HAMI_CORES, dqngpu_k8s::devices::HAMI_MEM_PCT] {
        assert!(managed.iter().any(|(n, ignored)| n == name && *ignored), "{name}");
    }
    assert_eq!(extenders[0]["bindVerb"], Value::from("bind"));
    assert_eq!(extenders[0]["nodeCacheCapable"], Value::from(true));
}

/// kube-scheduler's `httpTimeout` for the extender is above a bind's worst case (eight
/// apiserver calls of up to 30 s each), or a bind that goes on and succeeds is answered to it
/// as failed. The shipped config said 30 s.
#[test]
fn the_extenders_http_timeout_covers_a_bind() {
    let cfg = scheduler_config();
    let t = cfg["extenders"][0]["httpTimeout"].as_str().expect("httpTimeout");
    let seconds: f64 = match t.strip_suffix('s') {
        Some(n) if !n.ends_with('m') => n.parse().unwrap(),
        _ => panic!("httpTimeout `{t}`: expected seconds, as `300s`"),
    };
    assert!(seconds >= 8.0 * 30.0, "httpTimeout {t}");
}
