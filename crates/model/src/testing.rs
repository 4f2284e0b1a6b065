//! Helpers the workspace's tests share (not part of the product's interface).

/// How many cases a property test runs: `PROPTEST_CASES` where set to a number (a longer fuzz
/// campaign, `PROPTEST_CASES=N cargo test --release ...`), else `default` (what CI runs).
pub fn cases_or(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|c| c.trim().parse().ok()).unwrap_or(default)
}
