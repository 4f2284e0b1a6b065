//! A parallel map that starts the costliest items first (longest-processing-time order), so a
//! long episode does not run alone on one core at the end of a stage. Results come back in the
//! items' order, and each is computed exactly as a plain map would, so training stays
//! bit-for-bit the same whatever the order or thread count.

use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

/// `f(i, &items[i])` for every item, in parallel; workers take items by decreasing `work`
/// (an estimate; ties by index), results in `items`' order.
pub fn map<E: Sync, T: Send>(items: &[E], work: impl Fn(&E) -> f64, f: impl Fn(usize, &E) -> T + Sync) -> Vec<T> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    let estimate: Vec<f64> = items.iter().map(work).collect();
    order.sort_by(|&a, &b| estimate[b].total_cmp(&estimate[a]).then(a.cmp(&b)));
    let next = AtomicUsize::new(0);
    let workers = rayon::current_num_threads().clamp(1, items.len().max(1));
    let done: Vec<Vec<(usize, T)>> = (0..workers)
        .into_par_iter()
        .map(|_| {
            let mut out = Vec::new();
            while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                out.push((i, f(i, &items[i])));
            }
            out
        })
        .collect();
    let mut slots: Vec<Option<T>> = (0..items.len()).map(|_| None).collect();
    for (i, t) in done.into_iter().flatten() {
        slots[i] = Some(t);
    }
    // Every index was taken exactly once (the counter hands each out once).
    slots.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_items_order_whatever_the_estimate() {
        let items: Vec<u64> = (0..57).collect();
        let out = map(&items, |&x| ((x * 7919) % 13) as f64, |i, &x| (i as u64, x * x));
        assert_eq!(out.len(), items.len());
        for (i, (k, sq)) in out.iter().enumerate() {
            assert_eq!((*k, *sq), (i as u64, items[i] * items[i]));
        }
        assert!(map(&Vec::<u64>::new(), |_| 0.0, |_, &x| x).is_empty());
    }
}
