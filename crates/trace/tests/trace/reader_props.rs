//! Property tests: no input makes the readers panic; valid rows read back exactly.

use dqngpu_trace::reader::{parse_nodes, parse_pods};
use proptest::prelude::*;

const POD_HEADER: &str =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time";

proptest! {
    #![proptest_config(ProptestConfig { cases: dqngpu_model::testing::cases_or(512), ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        let _ = parse_pods(&text, "x.csv");
        let _ = parse_nodes(&text, "x.csv");
    }

    #[test]
    fn csv_like_rows_never_panic(rows in proptest::collection::vec(
        proptest::collection::vec("[-0-9a-zA-Z|. ]{0,8}", 0..13), 0..8)) {
        let body: Vec<String> = rows.iter().map(|r| r.join(",")).collect();
        let text = format!("{POD_HEADER}\n{}\n", body.join("\n"));
        match parse_pods(&text, "p.csv") {
            Ok(p) => prop_assert!(p.len() <= rows.len()),
            Err(e) => {
                let s = e.to_string();
                prop_assert!(s.contains("p.csv") && s.contains("line"), "{}", s);
            }
        }
        let ntext = format!("sn,cpu_milli,memory_mib,gpu,model\n{}\n", body.join("\n"));
        if let Err(e) = parse_nodes(&ntext, "n.csv") {
            prop_assert!(e.to_string().contains("n.csv"));
        }
    }

    #[test]
    fn valid_pods_read_back(cpu in 0u32..200_000, mem in 0u32..1_000_000, kind in 0u8..3, milli in 1u32..1000, n in 2u32..9) {
        let (num, gm) = match kind { 0 => (0, 0), 1 => (1, milli), _ => (n, 1000) };
        let text = format!("{POD_HEADER}\np,{cpu},{mem},{num},{gm},T4|A10,LS,Running,1,2,\n");
        let p = parse_pods(&text, "p.csv").unwrap();
        prop_assert_eq!(p[0].cpu_milli, cpu);
        prop_assert_eq!(p[0].memory_mib, mem);
        prop_assert_eq!(p[0].num_gpu, num);
        prop_assert_eq!(p[0].gpu_milli, gm);
        prop_assert_eq!(p[0].gpu_spec.len(), if num == 0 { 0 } else { 2 });
    }
}
