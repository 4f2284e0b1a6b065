//! Time-aware replay (`dqngpu trace replay --timed`, `dqngpu trace timed`): the pod lists carry
//! creation and deletion times, which the FGD experiment ignores. Here pods arrive in creation
//! order, run for their production run time, leave, and a pod that fits nowhere waits in a queue
//! until a departure makes room.
//!
//! - **Run time**: `deletion_time - scheduled_time` (`creation_time` for a pod never scheduled in
//!   production: the time it existed), at least 1 s. Unchanged by `load`.
//! - **Load**: the trace at its own pace asks for little of this cluster (default list: 0.2% of
//!   the GPU capacity on average, 1.1% at the peak), so nothing would ever queue. `load` divides
//!   the arrival times so that the **peak demand** (the most milli-GPU the pods would hold at
//!   once on an unbounded cluster) is `load` x the capacity: at 1.0 the pods at their busiest ask
//!   for exactly the cluster, so whatever waits, waits for fragmentation (GPU, CPU or memory
//!   left in pieces); above 1.0 a queue must form. Run times are not scaled. Most openb pods are
//!   created late in the five months the list spans, so the demand averaged over the arrival
//!   span is far below its peak (reported as `offered_load_pct`). `None` keeps the trace's times.
//! - **Queue** (kube-scheduler's): an arriving pod is tried at once, even when others wait; a
//!   pod that fits nowhere waits; after each departure the waiting pods are tried again in
//!   arrival order. Exactly: a waiting pod failed everywhere when last tried and placements
//!   only take room, so only the nodes a departure freed can have become feasible; those are
//!   the nodes it is offered (with every policy's own choice among them).
//! - **Reservation** (`reserve_after_s`, off by default): without it a pod that only an empty
//!   node can hold (8 GPUs and 120 cores) may wait for ever, because smaller pods keep taking
//!   whatever a departure frees (backfilling). With it, once the oldest waiting pod has waited
//!   that long (checked at every event), the node closest to holding it (the least shortfall in
//!   CPU, memory and free GPUs, each as a share of the node; then the lowest rank) is reserved:
//!   no other pod is placed there until the pod starts (there or on a node freed elsewhere),
//!   then the node is offered again to the waiting pods. One reservation at a time, as EASY
//!   backfilling (Slurm) holds one for the queue's head; the run times stay unknown to it.
//! - **Cluster**: `node_share` of the nodes of each GPU model, drawn by the seed. All the
//!   default list's pods at once ask for 98% of the whole openb cluster, so a peak at or above
//!   its capacity needs a smaller one: the default is a tenth.
//! - Ties: departures before arrivals at the same time; arrivals at the same time by name. The
//!   seed drives the node tie-break ranks and the random policy (the order is the trace's).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, GpuPick, Pod};
use crate::error::{Result, TraceError};
use crate::frag::FragModel;
use crate::policies::{Ctx, NodePolicy};
use crate::reader::{NodeRow, PodRow, MILLI};
use crate::replay::{build, choose_checked, init_frag, refresh_frag, shuffle_ranks};

/// Points of the allocation-over-time curve unless told: 0..=100% of the arrival span.
pub const DEFAULT_POINTS: usize = 101;

/// The peak demand unless told: the cluster's capacity, so pods wait only for fragmentation.
pub const DEFAULT_LOAD: f64 = 1.0;

/// The share of nodes kept unless told (see [`TimedConfig::node_share`]).
pub const DEFAULT_NODE_SHARE: f64 = 0.1;

/// Keeps `share` of each GPU model's nodes (rounded up), drawn by `rng`, in list order.
pub fn sample_nodes(nodes: &[NodeRow], share: f64, rng: &mut ChaCha8Rng) -> Result<Vec<NodeRow>> {
    if !(share.is_finite() && share > 0.0 && share <= 1.0) {
        return Err(TraceError::Unusable(format!("the node share must be in (0, 1], got {share}")));
    }
    if share == 1.0 {
        return Ok(nodes.to_vec());
    }
    let mut models: Vec<&str> = nodes.iter().map(|n| if n.gpus > 0 { n.model.as_str() } else { "" }).collect();
    models.sort_unstable();
    models.dedup();
    let mut keep = vec![false; nodes.len()];
    for m in models {
        let mut idx: Vec<usize> =
            (0..nodes.len()).filter(|&i| (if nodes[i].gpus > 0 { nodes[i].model.as_str() } else { "" }) == m).collect();
        idx.shuffle(rng);
        let n = (share * idx.len() as f64).ceil() as usize;
        for &i in &idx[..n.min(idx.len())] {
            keep[i] = true;
        }
    }
    Ok(nodes.iter().zip(&keep).filter(|(_, &k)| k).map(|(n, _)| n.clone()).collect())
}

/// How to replay in time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimedConfig {
    /// Peak GPU demand, as a share of capacity, the arrivals are compressed (or stretched) to;
    /// `None`: the trace's times.
    pub load: Option<f64>,
    /// The seed (node tie-break ranks, the random policy).
    pub seed: u64,
    /// Points of the curve, evenly spaced over the arrival span (at least 2).
    pub points: usize,
    /// Share of the nodes kept, in (0, 1]: of each GPU model (and of the CPU-only nodes), this
    /// share rounded up, drawn by the seed (module notes: why a tenth by default).
    pub node_share: f64,
    /// Retry waiting pods on every node after a departure, not only on the freed ones. The
    /// results are the same (module notes); a test checks that with this switch. Slower.
    pub retry_all_nodes: bool,
    /// Reserve a node for the oldest waiting pod once it has waited this long, seconds (module
    /// notes, **Reservation**); `None`: never, kube-scheduler's queue.
    #[serde(default)]
    pub reserve_after_s: Option<f64>,
}

impl Default for TimedConfig {
    fn default() -> Self {
        TimedConfig {
            load: Some(DEFAULT_LOAD),
            seed: 42,
            points: DEFAULT_POINTS,
            node_share: DEFAULT_NODE_SHARE,
            retry_all_nodes: false,
            reserve_after_s: None,
        }
    }
}

/// The cluster at one moment of the arrival span.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimedPoint {
    /// Replay time, seconds from the first arrival.
    pub t_s: f64,
    /// GPU milli allocated, % of capacity.
    pub allocation_pct: f64,
    /// Pods waiting.
    pub queued: usize,
}

/// The outcome of a timed replay. Times are the replay's clock (after `load` scaling).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimedResult {
    /// Policy name.
    pub policy: String,
    /// Seed.
    pub seed: u64,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// GPUs in the cluster.
    pub gpus: u64,
    /// Share of the list's nodes kept.
    pub node_share: f64,
    /// Pods in the list.
    pub pods: usize,
    /// Arrival times were divided by this.
    pub time_scale: f64,
    /// Offered GPU load after scaling: the demand of the arrived pods on an unbounded cluster,
    /// averaged over the arrival span, % of capacity.
    pub offered_load_pct: f64,
    /// Peak GPU demand after scaling: the most the pods would hold at once on an unbounded
    /// cluster, % of capacity (what `load` sets).
    pub peak_demand_pct: f64,
    /// From the first arrival to the last, seconds.
    pub arrival_span_s: f64,
    /// Pods placed (at arrival or after waiting).
    pub pods_placed: usize,
    /// Pods placed after waiting.
    pub pods_waited: usize,
    /// Pods still waiting when every placed pod had left (0 unless a policy declines to place).
    pub pods_unplaced: usize,
    /// Pods no node could ever hold (named; never queued).
    pub never_fit: Vec<String>,
    /// Queueing delay of the placed pods, seconds: mean, median, p95, p99, max.
    pub mean_wait_s: f64,
    /// Median queueing delay, seconds.
    pub p50_wait_s: f64,
    /// 95th percentile queueing delay, seconds.
    pub p95_wait_s: f64,
    /// 99th percentile queueing delay, seconds.
    pub p99_wait_s: f64,
    /// Longest queueing delay, seconds.
    pub max_wait_s: f64,
    /// Time-weighted GPU allocation over the arrival span, % of capacity.
    pub mean_allocation_pct: f64,
    /// Time-weighted CPU allocation over the arrival span, % of the kept nodes' CPU.
    pub mean_cpu_allocation_pct: f64,
    /// Most pods waiting at once.
    pub peak_queue: usize,
    /// Nodes reserved for a pod that had waited `reserve_after_s` (0 without reservation).
    #[serde(default)]
    pub reservations: usize,
    /// When the last pod left, seconds.
    pub end_s: f64,
    /// Allocation and queue over the arrival span.
    pub curve: Vec<TimedPoint>,
    /// Wall time, reading excluded.
    pub wall_s: f64,
}

/// Each pod's production run time, seconds; an error names the first pod without times.
pub fn run_times(pods: &[PodRow]) -> Result<Vec<u64>> {
    pods.iter()
        .enumerate()
        .map(|(k, p)| {
            let (Some(c), Some(d)) = (p.creation_time, p.deletion_time) else {
                return Err(TraceError::Unusable(format!(
                    "a timed replay needs creation_time and deletion_time; pod `{}` (data line {}) has none \
                     (the multi-GPU lists carry no times)",
                    p.name,
                    k + 2
                )));
            };
            Ok(d.saturating_sub(p.scheduled_time.unwrap_or(c)).max(1))
        })
        .collect()
}

/// The cluster with its fragmentation kept current, and the policy's randomness.
struct Placer<'a> {
    cluster: Cluster,
    frag: FragModel,
    rng: ChaCha8Rng,
    policy: &'a dyn NodePolicy,
    feasible: Vec<usize>,
    used: i64,
    used_cpu: i64,
}

impl Placer<'_> {
    /// Places `pod` on one of `candidates` that it fits, as the policy chooses.
    fn place(&mut self, pod: &Pod, candidates: impl Iterator<Item = usize>) -> Result<Option<(usize, GpuPick)>> {
        self.feasible.clear();
        for i in candidates {
            if self.cluster.fits(i, pod) {
                self.feasible.push(i);
            }
        }
        if self.feasible.is_empty() {
            return Ok(None);
        }
        let (node, pick) = {
            let mut cx = Ctx { cluster: &self.cluster, frag: &mut self.frag, rng: &mut self.rng };
            choose_checked(self.policy, &mut cx, pod, &self.feasible)?
        };
        self.cluster.apply(node, pod, &pick);
        self.used += pod.total_milli();
        self.used_cpu += pod.cpu;
        self.refresh_frag(node);
        Ok(Some((node, pick)))
    }

    fn release(&mut self, node: usize, pod: &Pod, pick: &GpuPick) {
        self.cluster.release(node, pod, pick);
        self.used -= pod.total_milli();
        self.used_cpu -= pod.cpu;
        self.refresh_frag(node);
    }

    fn refresh_frag(&mut self, node: usize) {
        refresh_frag(&mut self.cluster, &mut self.frag, node);
    }
}

/// Integrates allocation over the arrival span and samples the curve as time advances.
struct Clock {
    now: u64,
    horizon: u64,
    step: f64,
    next_point: usize,
    points: usize,
    integral: f64,
    cpu_integral: f64,
    curve: Vec<TimedPoint>,
}

impl Clock {
    fn advance(&mut self, to: u64, pl: &Placer<'_>, queued: usize, capacity: f64) {
        let used = pl.used;
        let (a, b) = (self.now.min(self.horizon), to.min(self.horizon));
        self.integral += used as f64 * (b - a) as f64;
        self.cpu_integral += pl.used_cpu as f64 * (b - a) as f64;
        while self.next_point < self.points {
            let t = (self.next_point as f64 * self.step).round() as u64;
            // Points strictly before `to` see the state that held until `to`; the last point
            // (the horizon) is taken once time reaches it.
            if t > to || (t == to && t < self.horizon) {
                break;
            }
            self.curve.push(TimedPoint { t_s: t as f64 / 1e6, allocation_pct: 100.0 * used as f64 / capacity, queued });
            self.next_point += 1;
        }
        self.now = to;
    }
}

/// The offered GPU load when arrival times are divided by `scale`: the GPU milli the arrived
/// pods would hold on an unbounded cluster, averaged over the arrival span, as a share of
/// `capacity`. Work past the span's end does not count, so a pod running for months offers
/// only its share of the span. `scale` = infinity: every pod at once.
fn offered_load(pods: &[Pod], run: &[u64], since: &[f64], span1: f64, capacity: f64, scale: f64) -> f64 {
    let held: f64 = pods
        .iter()
        .zip(run)
        .zip(since)
        .map(|((p, &r), &c)| p.total_milli() as f64 * (r as f64 * scale).min(span1 - c))
        .sum();
    held / (span1 * capacity)
}

/// The peak GPU demand when arrival times are divided by `scale`: the most milli-GPU the pods
/// would hold at once on an unbounded cluster, as a share of `capacity`. Non-decreasing in the
/// scale (compressed arrivals only overlap more); `scale` = infinity: every pod at once.
fn peak_demand(pods: &[Pod], run: &[u64], since: &[f64], capacity: f64, scale: f64) -> f64 {
    // (time, +milli at a start | -milli at an end); an end sorts before a start at the same time.
    let mut events: Vec<(f64, i64)> = Vec::with_capacity(2 * pods.len());
    for ((p, &r), &c) in pods.iter().zip(run).zip(since) {
        let m = p.total_milli();
        if m == 0 {
            continue;
        }
        let start = if scale.is_infinite() { 0.0 } else { c / scale };
        events.push((start, m));
        events.push((start + r as f64, -m));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut most) = (0i64, 0i64);
    for (_, d) in events {
        now += d;
        most = most.max(now);
    }
    most as f64 / capacity
}

/// The smallest time scale at which `f` (non-decreasing in the scale) reaches `target` (at most
/// its value at infinity): bisection in log space.
fn scale_for(target: f64, f: &dyn Fn(f64) -> f64) -> f64 {
    let (mut lo, mut hi) = (1e-9f64, 1.0f64);
    while f(hi) < target && hi < 1e15 {
        lo = hi;
        hi *= 2.0;
    }
    // 64 halvings of the log-ratio: far below any step of `f`.
    for _ in 0..64 {
        let mid = (lo * hi).sqrt();
        if f(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// Nearest-rank percentile of sorted `v` (0 when empty).
fn percentile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let k = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[k - 1]
}

/// Replays `pods` on `nodes` in time under `policy`.
/// One piece on purpose, like [`crate::replay()`]: the event loop keeps the cluster, the queue,
/// the departures and the clock together.
pub fn replay_timed(
    nodes: &[NodeRow],
    pods: &[PodRow],
    policy: &dyn NodePolicy,
    cfg: &TimedConfig,
) -> Result<TimedResult> {
    let start = Instant::now();
    if let Some(l) = cfg.load {
        if !(l.is_finite() && l > 0.0) {
            return Err(TraceError::Unusable(format!("the load must be a positive number, got {l}")));
        }
    }
    let reserve_after_us = match cfg.reserve_after_s {
        None => None,
        Some(s) if s.is_finite() && s >= 0.0 => Some((s * 1e6).round() as u64),
        Some(s) => {
            return Err(TraceError::Unusable(format!(
                "the reservation delay must be a non-negative number of seconds, got {s}"
            )))
        }
    };
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let nodes = &sample_nodes(nodes, cfg.node_share, &mut rng)?;
    let (mut cluster, all) = build(nodes, pods)?;
    let run = run_times(pods)?;
    let gpus = cluster.total_gpus();
    let capacity = (gpus * u64::from(MILLI)) as f64;
    shuffle_ranks(&mut cluster, &mut rng);

    // Arrival order and times.
    let created: Vec<u64> = pods.iter().map(|p| p.creation_time.unwrap_or(0)).collect();
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by(|&a, &b| created[a].cmp(&created[b]).then_with(|| pods[a].name.cmp(&pods[b].name)));
    let first = created[order[0]];
    let span1 = (created[order[order.len() - 1]] - first).max(1) as f64;
    let since: Vec<f64> = created.iter().map(|&c| (c - first) as f64).collect();
    // Pods no node can ever hold are never placed (warned about, counted apart): the load the
    // arrivals are scaled to, and the load offered, are the placeable pods'.
    let never: Vec<bool> = all.iter().map(|p| cluster.never_fits(p)).collect();
    let fits = |i: &usize| !never[*i];
    let fit_pods: Vec<Pod> = (0..all.len()).filter(fits).map(|i| all[i].clone()).collect();
    let fit_run: Vec<u64> = (0..all.len()).filter(fits).map(|i| run[i]).collect();
    let fit_since: Vec<f64> = (0..all.len()).filter(fits).map(|i| since[i]).collect();
    let offered = |scale: f64| offered_load(&fit_pods, &fit_run, &fit_since, span1, capacity, scale);
    let peak = |scale: f64| peak_demand(&fit_pods, &fit_run, &fit_since, capacity, scale);
    let scale = match cfg.load {
        None => 1.0,
        Some(l) => {
            // However far apart the arrivals, pods created in the same second overlap.
            let mut same_second: std::collections::BTreeMap<u64, i64> = std::collections::BTreeMap::new();
            for i in (0..all.len()).filter(fits) {
                *same_second.entry(created[i]).or_insert(0) += all[i].total_milli();
            }
            let least = same_second.values().copied().max().unwrap_or(0) as f64 / capacity;
            let most = peak(f64::INFINITY);
            if l < least {
                return Err(TraceError::Unusable(format!(
                    "pods of this list created in the same second ask for {:.1}% of the GPU capacity, above the {:.1}% peak asked",
                    100.0 * least,
                    100.0 * l
                )));
            }
            if l > most {
                return Err(TraceError::Unusable(format!(
                    "the pods of this list ask for at most {:.1}% of the GPU capacity at once (all of them), \
                     below the {:.1}% peak asked",
                    100.0 * most,
                    100.0 * l
                )));
            }
            scale_for(l, &peak)
        }
    };
    let arrive_us = |i: usize| ((created[i] - first) as f64 / scale * 1e6).round() as u64;

    let never_fit: Vec<String> = (0..all.len()).filter(|&i| never[i]).map(|i| pods[i].name.clone()).collect();

    let frag = init_frag(&mut cluster, &all);
    let n_nodes = cluster.specs.len();
    let mut pl = Placer { cluster, frag, rng, policy, feasible: Vec::with_capacity(n_nodes), used: 0, used_cpu: 0 };
    let horizon = arrive_us(order[order.len() - 1]);
    let points = cfg.points.max(2);
    let mut clock = Clock {
        now: 0,
        horizon,
        step: horizon as f64 / (points - 1) as f64,
        next_point: 0,
        points,
        integral: 0.0,
        cpu_integral: 0.0,
        curve: Vec::with_capacity(points),
    };

    // (departure time, pod) of the running pods, earliest first; where each runs in `placed_at`.
    let mut running: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut placed_at: Vec<Option<(usize, GpuPick)>> = vec![None; all.len()];
    let mut queue: VecDeque<usize> = VecDeque::new();
    let mut waits: Vec<f64> = Vec::with_capacity(all.len());
    let (mut next, mut peak_queue, mut end) = (0usize, 0usize, 0u64);
    let mut freed: Vec<usize> = Vec::new();
    // The one reservation: (waiting pod, node kept for it).
    let mut reserved: Option<(usize, usize)> = None;
    let mut reservations = 0usize;
    // The node pod `i` may not use: the one reserved for another pod.
    let kept_off = |reserved: Option<(usize, usize)>, i: usize| reserved.filter(|&(pod, _)| pod != i).map(|r| r.1);
    loop {
        let t_dep = running.peek().map(|Reverse((t, _))| *t);
        let t_arr = order.get(next).map(|&i| arrive_us(i));
        let t = match (t_dep, t_arr) {
            (None, None) => break,
            (Some(d), Some(a)) => d.min(a),
            (Some(d), None) => d,
            (None, Some(a)) => a,
        };
        clock.advance(t, &pl, queue.len(), capacity);
        // Nothing is placed between events, so reserving at the first event after the head
        // has waited long enough is the same as reserving at that moment.
        if let (Some(after), None, Some(&head)) = (reserve_after_us, reserved, queue.front()) {
            if t.saturating_sub(arrive_us(head)) >= after {
                reserved = closest_node(&pl.cluster, &all[head]).map(|n| (head, n));
                reservations += usize::from(reserved.is_some());
            }
        }
        if t_dep == Some(t) {
            freed.clear();
            while let Some(Reverse((dt, i))) = running.peek().copied() {
                if dt != t {
                    break;
                }
                running.pop();
                if let Some((node, pick)) = placed_at[i].take() {
                    pl.release(node, &all[i], &pick);
                    freed.push(node);
                }
                end = t;
            }
            freed.sort_unstable();
            freed.dedup();
            let mut still = VecDeque::with_capacity(queue.len());
            // The reserved node, once its pod has started: the pods after it (all of them: it
            // is the queue's head) were kept off it, so it is offered to them as if freed.
            let mut reopened: Option<usize> = None;
            while let Some(i) = queue.pop_front() {
                let off = kept_off(reserved, i);
                let got = if cfg.retry_all_nodes {
                    pl.place(&all[i], (0..n_nodes).filter(|&k| Some(k) != off))?
                } else {
                    pl.place(&all[i], freed.iter().copied().chain(reopened).filter(|&k| Some(k) != off))?
                };
                match got {
                    Some(p) => {
                        if let Some((pod, node)) = reserved {
                            if pod == i {
                                reserved = None;
                                reopened = (!freed.contains(&node)).then_some(node);
                            }
                        }
                        waits.push((t - arrive_us(i)) as f64 / 1e6);
                        running.push(Reverse((t.saturating_add(run[i].saturating_mul(1_000_000)), i)));
                        placed_at[i] = Some(p);
                    }
                    None => still.push_back(i),
                }
            }
            queue = still;
        } else {
            let i = order[next];
            next += 1;
            if never[i] {
                continue;
            }
            let off = kept_off(reserved, i);
            match pl.place(&all[i], (0..n_nodes).filter(|&k| Some(k) != off))? {
                Some(p) => {
                    waits.push(0.0);
                    running.push(Reverse((t.saturating_add(run[i].saturating_mul(1_000_000)), i)));
                    placed_at[i] = Some(p);
                }
                None => {
                    queue.push_back(i);
                    peak_queue = peak_queue.max(queue.len());
                }
            }
        }
    }
    clock.advance(clock.now.max(horizon), &pl, queue.len(), capacity);

    let pods_waited = waits.iter().filter(|&&w| w > 0.0).count();
    let mut sorted = waits.clone();
    sorted.sort_by(f64::total_cmp);
    let mean_wait_s = if waits.is_empty() { 0.0 } else { waits.iter().sum::<f64>() / waits.len() as f64 };
    let mean_allocation_pct = if horizon > 0 {
        100.0 * clock.integral / (capacity * horizon as f64)
    } else {
        clock.curve.first().map_or(0.0, |p| p.allocation_pct)
    };
    let cpu_capacity: i64 = pl.cluster.specs.iter().map(|s| s.cpu).sum();
    let mean_cpu_allocation_pct = if horizon > 0 && cpu_capacity > 0 {
        100.0 * clock.cpu_integral / (cpu_capacity as f64 * horizon as f64)
    } else {
        0.0
    };
    Ok(TimedResult {
        policy: policy.name().to_string(),
        seed: cfg.seed,
        nodes: n_nodes,
        gpus,
        node_share: cfg.node_share,
        pods: all.len(),
        time_scale: scale,
        offered_load_pct: 100.0 * offered(scale),
        peak_demand_pct: 100.0 * peak(scale),
        arrival_span_s: horizon as f64 / 1e6,
        pods_placed: waits.len(),
        pods_waited,
        pods_unplaced: queue.len(),
        never_fit,
        mean_wait_s,
        p50_wait_s: percentile(&sorted, 0.5),
        p95_wait_s: percentile(&sorted, 0.95),
        p99_wait_s: percentile(&sorted, 0.99),
        max_wait_s: sorted.last().copied().unwrap_or(0.0),
        mean_allocation_pct,
        mean_cpu_allocation_pct,
        peak_queue,
        reservations,
        end_s: end as f64 / 1e6,
        curve: clock.curve,
        wall_s: start.elapsed().as_secs_f64(),
    })
}

/// The node closest to holding `pod` among those that could hold it empty: the least
/// shortfall (CPU, memory or free GPUs it lacks now, each as a share of the node's; the
/// largest of the three), then the lowest rank. `None` when no node ever could.
fn closest_node(cluster: &Cluster, pod: &Pod) -> Option<usize> {
    let shortfall = |i: usize| {
        let (spec, st) = (&cluster.specs[i], &cluster.state[i]);
        let cpu = (pod.cpu - st.cpu_left).max(0) as f64 / spec.cpu.max(1) as f64;
        let mem = (pod.mem - st.mem_left).max(0) as f64 / spec.mem.max(1) as f64;
        let free = st.gpu_left.iter().filter(|&&g| g >= pod.milli).count();
        let gpu = (pod.num_gpu as usize).saturating_sub(free) as f64 / spec.gpus.max(1) as f64;
        cpu.max(mem).max(gpu)
    };
    (0..cluster.specs.len())
        .filter(|&i| cluster.could_ever_fit(i, pod))
        .min_by(|&a, &b| shortfall(a).total_cmp(&shortfall(b)).then(cluster.rank[a].cmp(&cluster.rank[b])))
}

/// One policy's timed results, averaged over seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimedSummary {
    /// Policy name.
    pub policy: String,
    /// Seeds averaged.
    pub seeds: usize,
    /// Mean queueing delay, seconds.
    pub mean_wait_s: f64,
    /// 95th percentile queueing delay, seconds.
    pub p95_wait_s: f64,
    /// Longest queueing delay, seconds.
    pub max_wait_s: f64,
    /// Share of placed pods that waited, %.
    pub waited_pct: f64,
    /// Time-weighted GPU allocation over the arrival span, % of capacity.
    pub mean_allocation_pct: f64,
    /// Time-weighted CPU allocation over the arrival span, % of the CPU.
    pub mean_cpu_allocation_pct: f64,
    /// Most pods waiting at once.
    pub peak_queue: f64,
    /// Reservations made (0 without `reserve_after_s`).
    pub reservations: f64,
}

/// Per-policy means over seeds, in the order the policies first appear.
pub fn summarize(results: &[TimedResult]) -> Vec<TimedSummary> {
    let mut names: Vec<&str> = Vec::new();
    for r in results {
        if !names.contains(&r.policy.as_str()) {
            names.push(&r.policy);
        }
    }
    names
        .iter()
        .map(|name| {
            let rs: Vec<&TimedResult> = results.iter().filter(|r| r.policy == *name).collect();
            let n = rs.len() as f64;
            let mean = |f: &dyn Fn(&TimedResult) -> f64| rs.iter().map(|r| f(r)).sum::<f64>() / n;
            TimedSummary {
                policy: name.to_string(),
                seeds: rs.len(),
                mean_wait_s: mean(&|r| r.mean_wait_s),
                p95_wait_s: mean(&|r| r.p95_wait_s),
                max_wait_s: mean(&|r| r.max_wait_s),
                waited_pct: mean(&|r| 100.0 * r.pods_waited as f64 / r.pods_placed.max(1) as f64),
                mean_allocation_pct: mean(&|r| r.mean_allocation_pct),
                mean_cpu_allocation_pct: mean(&|r| r.mean_cpu_allocation_pct),
                peak_queue: mean(&|r| r.peak_queue as f64),
                reservations: mean(&|r| r.reservations as f64),
            }
        })
        .collect()
}

/// Writes `summary.csv`, `curves.csv` (allocation and queue over the arrival span, the first
/// seed of each policy), `allocation_over_time.{svg,png}` and, last, `results.json` into `dir`.
pub fn write_timed(results: &[TimedResult], dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>> {
    use crate::plots::{LineChart, Series};
    use crate::policies::paper_label;
    use std::fmt::Write as _;

    std::fs::create_dir_all(dir).map_err(|e| TraceError::io(dir, e))?;
    let put = |name: &str, text: &str| -> Result<std::path::PathBuf> {
        let path = dir.join(name);
        dqngpu_model::error::write_file_atomic(&path, text.as_bytes())?;
        Ok(path)
    };
    let json = serde_json::to_string_pretty(results).map_err(|e| TraceError::Unusable(e.to_string()))?;
    // An earlier run's results.json goes first and ours comes last, so a run stopped part
    // way leaves none beside a mix of its files and the earlier ones.
    dqngpu_model::error::remove_file_if_present(&dir.join("results.json"))?;
    let mut out = Vec::new();

    let mut s = String::from(
        "policy,seeds,mean_wait_s,p95_wait_s,max_wait_s,waited_pct,mean_allocation_pct,mean_cpu_allocation_pct,peak_queue,reservations\n",
    );
    let summary = summarize(results);
    for m in &summary {
        let _ = writeln!(
            s,
            "{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.1},{:.1}",
            m.policy,
            m.seeds,
            m.mean_wait_s,
            m.p95_wait_s,
            m.max_wait_s,
            m.waited_pct,
            m.mean_allocation_pct,
            m.mean_cpu_allocation_pct,
            m.peak_queue,
            m.reservations
        );
    }
    out.push(put("summary.csv", &s)?);

    let firsts: Vec<&TimedResult> =
        summarize(results).iter().filter_map(|m| results.iter().find(|r| r.policy == m.policy)).collect();
    let mut c = String::from("point,t_s");
    for r in &firsts {
        let _ = write!(c, ",{0}_allocation_pct,{0}_queued", r.policy);
    }
    c.push('\n');
    let rows = firsts.iter().map(|r| r.curve.len()).max().unwrap_or(0);
    for k in 0..rows {
        let t = firsts.iter().find_map(|r| r.curve.get(k)).map_or(0.0, |p| p.t_s);
        let _ = write!(c, "{k},{t:.3}");
        for r in &firsts {
            match r.curve.get(k) {
                Some(p) => {
                    let _ = write!(c, ",{:.3},{}", p.allocation_pct, p.queued);
                }
                None => c.push_str(",,"),
            }
        }
        c.push('\n');
    }
    out.push(put("curves.csv", &c)?);

    if let Some(r0) = firsts.first() {
        let chart = LineChart {
            title: format!(
                "GPU allocation over time, peak demand {:.0}% of capacity, seed {}",
                r0.peak_demand_pct, r0.seed
            ),
            x_desc: format!("time, % of the arrival span ({:.0} s)", r0.arrival_span_s),
            y_desc: "GPU allocated, % of capacity".into(),
            series: firsts
                .iter()
                .map(|r| Series {
                    label: paper_label(&r.policy).to_string(),
                    points: r.curve.iter().map(|p| Some(p.allocation_pct)).collect(),
                })
                .collect(),
            marks: Vec::new(),
            x_range: (0.0, (r0.curve.len().max(2) - 1) as f64),
            y_range: (0.0, 100.0),
        };
        let (svg, png) = chart.write(dir, "allocation_over_time")?;
        out.push(svg);
        out.push(png);
    }
    out.push(put("results.json", &json)?);
    Ok(out)
}
