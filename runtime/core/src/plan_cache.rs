//! Parsed plans kept in memory by a key (a plan's checksum in a store, a spec text's SHA-256 in
//! the MCP server), bounded by their total size rather than their count: a plan of a
//! 100,000-step spec is hundreds of megabytes, so a count bound of 32 allowed gigabytes, and
//! the memory stayed taken. A plan's size is measured as its compact JSON length, counted
//! without building the text; a plan larger than the whole budget is not kept at all (it is
//! read or compiled again when needed, which costs time but no memory held).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use stratum_compiler::plan::Plan;

/// The default bound of one cache: the total JSON size of the plans it holds. In memory a
/// plan takes a few times its JSON size (a 100,000-step spec: about 40 MB of JSON, 180 MB
/// parsed), so this keeps one cache to some 150 MB at worst; the plans of ordinary specs are
/// kilobytes, and thousands of them fit.
pub const PLAN_CACHE_BYTES: usize = 32 * 1024 * 1024;

/// The variable that sets every plan cache's budget of this process, in mebibytes (`0` keeps
/// no plan): for a server with little memory, or one that serves only huge specs.
pub const PLAN_CACHE_VARIABLE: &str = "STRATUM_PLAN_CACHE_MIB";

/// The budget of a new cache: `STRATUM_PLAN_CACHE_MIB` when it is set to a whole number of
/// mebibytes, [`PLAN_CACHE_BYTES`] otherwise (a value that is not a number is logged and
/// ignored, since a cache's size never makes a command fail).
pub fn configured_budget() -> usize {
    match std::env::var(PLAN_CACHE_VARIABLE) {
        Ok(text) => budget_from(&text).unwrap_or_else(|| {
            tracing::warn!(
                "{PLAN_CACHE_VARIABLE}={text:?} is not a whole number of mebibytes; \
                 the plan caches keep {} MiB each",
                PLAN_CACHE_BYTES / MIB
            );
            PLAN_CACHE_BYTES
        }),
        Err(_) => PLAN_CACHE_BYTES,
    }
}

const MIB: usize = 1024 * 1024;

fn budget_from(text: &str) -> Option<usize> {
    text.trim().parse::<usize>().ok()?.checked_mul(MIB)
}

/// Plans by key, the oldest dropped first while the total size is over the budget.
pub struct PlanCache {
    plans: HashMap<String, (Arc<Plan>, usize)>,
    order: VecDeque<String>,
    held: usize,
    budget: usize,
}

impl Default for PlanCache {
    /// A cache of the [`configured_budget`].
    fn default() -> PlanCache {
        PlanCache::with_budget(configured_budget())
    }
}

impl PlanCache {
    /// A cache that holds at most `budget` bytes of plans (measured by [`plan_size`]).
    pub fn with_budget(budget: usize) -> PlanCache {
        PlanCache {
            plans: HashMap::new(),
            order: VecDeque::new(),
            held: 0,
            budget,
        }
    }

    pub fn get(&self, key: &str) -> Option<Arc<Plan>> {
        self.plans.get(key).map(|(plan, _)| plan.clone())
    }

    /// Keeps `plan` under `key`; `size` is its size in bytes ([`plan_size`], or the length of
    /// the JSON it was read from). Older plans are dropped to make room; a plan larger than
    /// the budget is not kept.
    pub fn insert(&mut self, key: String, plan: Arc<Plan>, size: usize) {
        if self.plans.contains_key(&key) || size > self.budget {
            return;
        }
        while self.held + size > self.budget {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some((_, dropped)) = self.plans.remove(&oldest) {
                self.held = self.held.saturating_sub(dropped);
            }
        }
        self.held += size;
        self.order.push_back(key.clone());
        self.plans.insert(key, (plan, size));
    }

    /// The total size of the plans held, in bytes: never more than the budget.
    pub fn held_bytes(&self) -> usize {
        self.held
    }

    /// How many plans are held.
    pub fn len(&self) -> usize {
        self.plans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.plans.is_empty()
    }
}

/// A plan's size: the length of its compact JSON, counted as it is written, without keeping
/// the text. Plain data with string keys serialises; were it ever not to, the size is
/// `usize::MAX` and the plan is not kept.
pub fn plan_size(plan: &Plan) -> usize {
    json_size(plan)
}

/// The length of `value`'s compact JSON, counted as it is written, without keeping the text
/// (`usize::MAX` if it does not serialise): what the caches and the MCP argument limits
/// measure.
pub fn json_size<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(steps: usize) -> Arc<Plan> {
        let spec = format!(
            "version: \"0.2\"\nflows:\n  main:\n    input: {{}}\n    steps:\n{}",
            (0..steps)
                .map(|n| format!("      - id: s{n}\n        intent: \"step {n}\"\n"))
                .collect::<String>()
        );
        Arc::new(
            crate::compile::plan_from_spec("spec.stratum.yaml", &spec)
                .unwrap_or_else(|_| panic!("the test spec of {steps} steps compiles")),
        )
    }

    #[test]
    fn the_plans_held_never_exceed_the_budget_in_bytes() {
        let big = plan(200);
        let size = plan_size(&big);
        assert_eq!(
            size + 1,
            big.to_json(false).len(),
            "the JSON, without its newline"
        );
        // Room for two such plans, not three.
        let mut cache = PlanCache::with_budget(size * 2 + size / 2);
        for key in ["a", "b", "c", "d"] {
            cache.insert(key.to_owned(), big.clone(), size);
            assert!(cache.held_bytes() <= size * 2 + size / 2);
        }
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.held_bytes(), size * 2);
        assert!(cache.get("a").is_none() && cache.get("b").is_none());
        assert!(cache.get("c").is_some() && cache.get("d").is_some());
        // Many small plans fit where the big ones did not.
        let small = plan(1);
        let small_size = plan_size(&small);
        for n in 0..100 {
            cache.insert(format!("small-{n}"), small.clone(), small_size);
        }
        assert!(cache.held_bytes() <= size * 2 + size / 2);
        assert!(cache.get("small-99").is_some());
    }

    #[test]
    fn the_budget_variable_reads_whole_mebibytes() {
        assert_eq!(budget_from("8"), Some(8 * MIB));
        assert_eq!(budget_from(" 0 "), Some(0));
        assert_eq!(budget_from("-1"), None);
        assert_eq!(budget_from("1.5"), None);
        assert_eq!(budget_from("32MiB"), None);
        assert_eq!(budget_from(&u64::MAX.to_string()), None);
    }

    #[test]
    fn a_plan_larger_than_the_budget_is_not_kept() {
        let big = plan(50);
        let size = plan_size(&big);
        let mut cache = PlanCache::with_budget(size - 1);
        cache.insert("big".to_owned(), big, size);
        assert!(cache.is_empty());
        assert_eq!(cache.held_bytes(), 0);
    }
}
