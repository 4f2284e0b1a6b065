//! The league table (issue 10 item 7): in every (cell, class), each policy's mean JCT and
//! makespan relative to the best heuristic's there, and what each policy trades: its mean JCT
//! ratio against the 95th-percentile execution slowdown of its jobs.

use crate::results::SummaryRow;

/// The heuristics a learned policy is measured against (issue 10's list).
pub use dqngpu_policy::RIVALS as HEURISTICS;

/// One policy in one (cell, class).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Cell name (`main` for the experiment's own setting).
    pub cell: String,
    /// Workload class.
    pub class: String,
    /// Scheduler.
    pub scheduler: String,
    /// Mean JCT / the best heuristic's mean JCT in this (cell, class).
    pub jct_ratio: f64,
    /// Makespan / the best heuristic's makespan.
    pub makespan_ratio: f64,
    /// Mean over seeds of the jobs' p95 execution slowdown.
    pub p95_slowdown: f64,
    /// Heuristics (other than itself) whose mean JCT and makespan are both more than 1% below
    /// this policy's here: the rules that beat it outright.
    pub beaten_by: Vec<String>,
    /// Whether some heuristic is itself within issue 10's lines here. Where none is, the best
    /// JCT and the best makespan come from rules that trade one for the other.
    pub a_rule_within: bool,
    /// The best heuristic's mean JCT / the mean-JCT lower bound of these job sets: how far
    /// below the best rule any policy could go (infinite where the bound is unknown).
    pub jct_room: f64,
}

/// How much lower both metrics must be for a rule to beat a policy outright.
const OUTRIGHT: f64 = 0.99;

/// Issue 10's lines: mean JCT <= 1.01x and makespan <= 1.02x the best heuristic's.
fn within_lines(jct_ratio: f64, makespan_ratio: f64) -> bool {
    jct_ratio <= 1.01 && makespan_ratio <= 1.02
}

impl Entry {
    /// Within issue 10's lines: JCT <= 1.01x and makespan <= 1.02x the best heuristic's.
    pub fn within(&self) -> bool {
        within_lines(self.jct_ratio, self.makespan_ratio)
    }

    /// JCT at least 5% below the best heuristic's.
    pub fn better_by_5pct(&self) -> bool {
        self.jct_ratio <= 0.95
    }

    /// Whether any policy could be 5% better here: the bound leaves that much room.
    pub fn room_for_5pct(&self) -> bool {
        0.95 * self.jct_room >= 1.0
    }
}

/// `league.csv`: one row per entry, with its ratios and whether it meets issue 10's lines
/// (so runs can be compared pair by pair without redoing the league).
pub fn league_csv(entries: &[Entry]) -> String {
    let mut s = String::from(
        "cell,class,scheduler,jct_ratio,makespan_ratio,p95_slowdown,within,better_by_5pct,beaten_on_both_by,a_rule_within,jct_room\n",
    );
    for e in entries {
        s.push_str(&format!(
            "{},{},{},{:.4},{:.4},{:.4},{},{},{},{},{:.4}\n",
            e.cell,
            e.class,
            e.scheduler,
            e.jct_ratio,
            e.makespan_ratio,
            e.p95_slowdown,
            e.within(),
            e.better_by_5pct(),
            e.beaten_by.join(";"),
            e.a_rule_within,
            e.jct_room
        ));
    }
    s
}

/// Every (cell, class, scheduler) of `rows` with its ratios; (cell, class) pairs without a
/// heuristic are left out.
pub fn entries(rows: &[SummaryRow]) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in rows {
        let k = (r.cell.clone(), r.workload.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for (cell, class) in keys {
        let here: Vec<&SummaryRow> = rows.iter().filter(|r| r.cell == cell && r.workload == class).collect();
        let heur: Vec<&SummaryRow> =
            here.iter().copied().filter(|r| HEURISTICS.contains(&r.scheduler.as_str())).collect();
        let best_jct = heur.iter().map(|r| r.mean_jct_s_mean).fold(f64::INFINITY, f64::min);
        let best_mk = heur.iter().map(|r| r.makespan_s_mean).fold(f64::INFINITY, f64::min);
        if !(best_jct.is_finite() && best_jct > 0.0 && best_mk.is_finite() && best_mk > 0.0) {
            continue;
        }
        let a_rule_within =
            heur.iter().any(|h| within_lines(h.mean_jct_s_mean / best_jct, h.makespan_s_mean / best_mk));
        // Every row here ran the same job sets, so any row's bound holds for all of them.
        let bound = here.iter().map(|r| r.jct_lower_bound_s_mean).fold(0.0, f64::max);
        let jct_room = if bound > 0.0 { best_jct / bound } else { f64::INFINITY };
        for r in here {
            let beaten_by = heur
                .iter()
                .filter(|h| {
                    h.scheduler != r.scheduler
                        && h.mean_jct_s_mean < OUTRIGHT * r.mean_jct_s_mean
                        && h.makespan_s_mean < OUTRIGHT * r.makespan_s_mean
                })
                .map(|h| h.scheduler.clone())
                .collect();
            out.push(Entry {
                cell: cell.clone(),
                class: class.clone(),
                scheduler: r.scheduler.clone(),
                jct_ratio: r.mean_jct_s_mean / best_jct,
                makespan_ratio: r.makespan_s_mean / best_mk,
                p95_slowdown: r.p95_exec_slowdown_mean,
                beaten_by,
                a_rule_within,
                jct_room,
            });
        }
    }
    out
}

/// The (cell, class) pairs of `entries`, in order, each with whether some heuristic is within
/// issue 10's lines there.
pub fn pairs(entries: &[Entry]) -> Vec<(&str, &str, bool)> {
    first_of_each_pair(entries).map(|e| (e.cell.as_str(), e.class.as_str(), e.a_rule_within)).collect()
}

/// The (cell, class) pairs of `entries` where no policy can have a mean JCT 5% below the best
/// heuristic's: the best heuristic is within 5% of the mean-JCT lower bound there.
pub fn pairs_without_room(entries: &[Entry]) -> Vec<(&str, &str)> {
    first_of_each_pair(entries).filter(|e| !e.room_for_5pct()).map(|e| (e.cell.as_str(), e.class.as_str())).collect()
}

/// The first entry of each (cell, class), in order of appearance: what is said of a pair
/// (whether a rule is within the lines, the room) is the same in all its entries.
fn first_of_each_pair(entries: &[Entry]) -> impl Iterator<Item = &Entry> {
    entries
        .iter()
        .enumerate()
        .filter(move |&(k, e)| !entries[..k].iter().any(|o| o.cell == e.cell && o.class == e.class))
        .map(|(_, e)| e)
}

/// A policy over every (cell, class): means of its ratios and how often it meets issue 10's
/// lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Standing {
    /// Scheduler.
    pub scheduler: String,
    /// (cell, class) pairs it ran in.
    pub pairs: usize,
    /// Mean JCT ratio.
    pub jct_ratio: f64,
    /// Mean makespan ratio.
    pub makespan_ratio: f64,
    /// Mean p95 execution slowdown.
    pub p95_slowdown: f64,
    /// Pairs with JCT <= 1.01x and makespan <= 1.02x the best heuristic's.
    pub within: usize,
    /// Pairs with JCT at least 5% below the best heuristic's.
    pub better_by_5pct: usize,
    /// Pairs where some heuristic beats it outright (both metrics more than 1% lower).
    pub beaten_on_both: usize,
}

/// One standing per scheduler, in `order`.
pub fn standings(entries: &[Entry], order: &[String]) -> Vec<Standing> {
    order
        .iter()
        .filter_map(|s| {
            let mine: Vec<&Entry> = entries.iter().filter(|e| &e.scheduler == s).collect();
            if mine.is_empty() {
                return None;
            }
            let n = mine.len() as f64;
            let mean = |f: &dyn Fn(&Entry) -> f64| mine.iter().map(|e| f(e)).sum::<f64>() / n;
            Some(Standing {
                scheduler: s.clone(),
                pairs: mine.len(),
                jct_ratio: mean(&|e| e.jct_ratio),
                makespan_ratio: mean(&|e| e.makespan_ratio),
                p95_slowdown: mean(&|e| e.p95_slowdown),
                within: mine.iter().filter(|e| e.within()).count(),
                better_by_5pct: mine.iter().filter(|e| e.better_by_5pct()).count(),
                beaten_on_both: mine.iter().filter(|e| !e.beaten_by.is_empty()).count(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cell: &str, class: &str, s: &str, jct: f64, mk: f64) -> SummaryRow {
        SummaryRow {
            cell: cell.into(),
            workload: class.into(),
            scheduler: s.into(),
            mean_jct_s_mean: jct,
            makespan_s_mean: mk,
            p95_exec_slowdown_mean: 1.2,
            ..crate::results::tests::blank_row()
        }
    }

    #[test]
    fn ratios_are_to_the_best_heuristic_per_cell_and_class() {
        let rows = vec![
            row("a", "random", "sjf", 100.0, 400.0),
            row("a", "random", "bestfit", 120.0, 300.0),
            row("a", "random", "dqngpu", 90.0, 303.0),
            row("b", "random", "sjf", 10.0, 40.0),
            row("b", "random", "dqngpu", 10.05, 41.0),
            // No heuristic here: left out.
            row("c", "random", "dqngpu", 1.0, 1.0),
        ];
        let e = entries(&rows);
        let d: Vec<&Entry> = e.iter().filter(|e| e.scheduler == "dqngpu").collect();
        assert_eq!(d.len(), 2);
        assert!((d[0].jct_ratio - 0.9).abs() < 1e-12 && (d[0].makespan_ratio - 1.01).abs() < 1e-12);
        assert!((d[1].jct_ratio - 1.005).abs() < 1e-12 && (d[1].makespan_ratio - 1.025).abs() < 1e-12);
        let s = standings(&e, &["dqngpu".to_string(), "sjf".to_string(), "none".to_string()]);
        assert_eq!(s.len(), 2);
        // Cell a: within both lines and 10% better; cell b: makespan 2.5% over.
        assert_eq!((s[0].within, s[0].better_by_5pct, s[0].pairs), (1, 1, 2));
        assert_eq!(s[1].scheduler, "sjf");
        let csv = league_csv(&e);
        // In cell a neither rule is within both lines (sjf's makespan, bestfit's JCT).
        assert!(csv.contains("a,random,dqngpu,0.9000,1.0100,1.2000,true,true,,false,inf\n"), "{csv}");
        assert!(csv.contains("b,random,dqngpu,1.0050,1.0250,1.2000,false,false,,true,inf\n"), "{csv}");
        // sjf (100, 400) is beaten outright by dqngpu only, which is not a heuristic.
        assert!(csv.contains("a,random,sjf,1.0000,1.3333,1.2000,false,false,,false,inf\n"), "{csv}");
        assert_eq!(csv.lines().count(), 1 + e.len());
    }

    #[test]
    fn a_rule_better_on_both_metrics_is_named_and_conflicting_lines_are_flagged() {
        let rows = vec![
            // JCT's best rule and makespan's best rule differ, and neither is within both lines.
            row("a", "random", "sjf", 100.0, 500.0),
            row("a", "random", "bestfit", 150.0, 300.0),
            row("a", "random", "greedy", 120.0, 320.0),
            // Beaten outright by greedy (both > 1% lower), not by sjf or bestfit.
            row("a", "random", "dqngpu", 125.0, 330.0),
            // Within 1% on one metric: not beaten outright.
            row("b", "random", "sjf", 100.0, 100.0),
            row("b", "random", "dqngpu", 100.5, 110.0),
        ];
        let e = entries(&rows);
        let find = |cell: &str, s: &str| e.iter().find(|x| x.cell == cell && x.scheduler == s).unwrap().clone();
        assert_eq!(find("a", "dqngpu").beaten_by, vec!["greedy".to_string()]);
        assert!(find("a", "greedy").beaten_by.is_empty());
        assert!(!find("a", "dqngpu").a_rule_within);
        assert!(find("b", "dqngpu").beaten_by.is_empty() && find("b", "dqngpu").a_rule_within);
        let s = standings(&e, &["dqngpu".to_string()]);
        assert_eq!((s[0].beaten_on_both, s[0].pairs), (1, 2));
        assert_eq!(pairs(&e), vec![("a", "random", false), ("b", "random", true)]);
        assert!(league_csv(&e).contains("a,random,dqngpu,1.2500,1.1000,1.2000,false,false,greedy,false,inf\n"));
    }

    #[test]
    fn the_jct_bound_says_where_no_policy_can_be_5pct_better() {
        let bounded = |cell: &str, s: &str, jct: f64, bound: f64| SummaryRow {
            jct_lower_bound_s_mean: bound,
            ..row(cell, "random", s, jct, 100.0)
        };
        let rows = vec![
            // The best rule (100 s) is 4% above the bound: nothing can be 5% better.
            bounded("a", "sjf", 100.0, 96.0),
            bounded("a", "dqngpu", 99.0, 96.0),
            // 6% above it: room for 5%.
            bounded("b", "sjf", 106.0, 100.0),
            bounded("b", "dqngpu", 100.0, 100.0),
            // No bound recorded (an older summary): room is not ruled out.
            row("c", "random", "sjf", 100.0, 100.0),
        ];
        let e = entries(&rows);
        let room = |cell: &str| e.iter().find(|x| x.cell == cell).unwrap().jct_room;
        assert!((room("a") - 100.0 / 96.0).abs() < 1e-12 && (room("b") - 1.06).abs() < 1e-12);
        assert!(room("c").is_infinite());
        assert_eq!(pairs_without_room(&e), vec![("a", "random")]);
        assert!(league_csv(&e).contains("b,random,dqngpu,0.9434,1.0000,1.2000,true,true,,true,1.0600\n"));
    }
}
