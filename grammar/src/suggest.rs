//! Did-you-mean: the known name closest to a misspelt one.
//!
//! A candidate is close when its [optimal string alignment distance](distance) from the name
//! is at most `max(1, len / 3)` edits (`len` in characters of the name), and the edits do not
//! replace the whole name (`x` is not a typo of `y`). When no candidate is that close, a
//! candidate equal but for case (`none` for `None`), then one within the distance ignoring
//! case, then the only candidate that extends or abbreviates the name (`conf` for
//! `confidence`, three characters at least) is taken. Ties go to the smaller distance, then
//! to the candidate that sorts first, so the answer never depends on the candidates' order.

/// Names longer than this are not compared edit by edit: no one misspells a name that long,
/// and the comparison costs the product of the lengths.
const MAX_COMPARED_LEN: usize = 256;

/// The candidate closest to `name`, if one is a plausible typo of it. `name` itself is never
/// suggested.
pub fn did_you_mean<'a, I>(name: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let candidates: Vec<&'a str> = candidates
        .into_iter()
        .filter(|candidate| *candidate != name)
        .collect();
    let name_len = name.chars().count();
    if name_len == 0 {
        return None;
    }
    let allowed = (name_len / 3).max(1);
    let lower = name.to_lowercase();
    closest(name, name_len, allowed, &candidates, false)
        .or_else(|| {
            let same_but_case = candidates
                .iter()
                .copied()
                .filter(|candidate| candidate.to_lowercase() == lower)
                .min();
            same_but_case.or_else(|| closest(&lower, name_len, allowed, &candidates, true))
        })
        .or_else(|| {
            if name_len < 3 {
                return None;
            }
            let mut related = candidates.iter().copied().filter(|candidate| {
                let candidate = candidate.to_lowercase();
                candidate.chars().count() >= 3
                    && (candidate.starts_with(&lower) || lower.starts_with(&candidate))
            });
            let first = related.next()?;
            related.next().is_none().then_some(first)
        })
}

/// The candidate within `allowed` edits of `name` with the smallest distance.
fn closest<'a>(
    name: &str,
    name_len: usize,
    allowed: usize,
    candidates: &[&'a str],
    ignore_case: bool,
) -> Option<&'a str> {
    if name_len > MAX_COMPARED_LEN {
        return None;
    }
    candidates
        .iter()
        .filter_map(|&candidate| {
            let candidate_len = candidate.chars().count();
            // A length difference alone can rule a candidate out, before any work.
            if name_len.abs_diff(candidate_len) > allowed || candidate_len > MAX_COMPARED_LEN {
                return None;
            }
            let distance = if ignore_case {
                distance(name, &candidate.to_lowercase())
            } else {
                distance(name, candidate)
            };
            let whole_name = distance >= name_len.max(candidate_len);
            (distance <= allowed && !whole_name).then_some((distance, candidate))
        })
        .min()
        .map(|(_, candidate)| candidate)
}

/// The optimal string alignment distance between `a` and `b`, in characters: insertions,
/// deletions, substitutions and transpositions of adjacent characters each cost one (so
/// `tpye` is one edit from `type`), and no substring is edited twice.
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rolling rows: two back (for transpositions), previous and current.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current: Vec<usize> = vec![0; b.len() + 1];
    for (i, &ca) in a.iter().enumerate() {
        current.fill(0);
        if let Some(first) = current.first_mut() {
            *first = i + 1;
        }
        for (j, &cb) in b.iter().enumerate() {
            let cell = |row: &[usize], k: usize| row.get(k).copied().unwrap_or(usize::MAX - 1);
            let substitution = cell(&previous, j) + usize::from(ca != cb);
            let deletion = cell(&previous, j + 1) + 1;
            let insertion = cell(&current, j) + 1;
            let mut best = substitution.min(deletion).min(insertion);
            let transposed = i > 0
                && j > 0
                && ca != cb
                && a.get(i - 1) == Some(&cb)
                && b.get(j - 1) == Some(&ca);
            if transposed {
                best = best.min(cell(&before, j - 1) + 1);
            }
            if let Some(slot) = current.get_mut(j + 1) {
                *slot = best;
            }
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous.last().copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_each_edit_once() {
        assert_eq!(distance("tpye", "type"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("abc", ""), 3);
        assert_eq!(distance("reslt", "result"), 1);
        assert_eq!(distance("confidense", "confidence"), 1);
        assert_eq!(distance("ca", "abc"), 3);
        assert_eq!(distance("é", "e"), 1);
    }

    #[test]
    fn suggests_plausible_typos_only() {
        let names = ["result", "item", "accumulator"];
        assert_eq!(did_you_mean("reslt", names), Some("result"));
        assert_eq!(did_you_mean("rseult", names), Some("result"));
        assert_eq!(did_you_mean("Result", names), Some("result"));
        assert_eq!(did_you_mean("accumulater", names), Some("accumulator"));
        assert_eq!(did_you_mean("items", names), Some("item"));
        assert_eq!(did_you_mean("output", names), None);
        assert_eq!(did_you_mean("result", names), None);
        assert_eq!(did_you_mean("x", ["y", "t"]), None);
        assert_eq!(did_you_mean("ab", ["ac"]), Some("ac"));
        assert_eq!(did_you_mean("", names), None);
    }

    #[test]
    fn falls_back_to_case_and_prefixes() {
        assert_eq!(
            did_you_mean("none", ["None", "True", "False"]),
            Some("None")
        );
        assert_eq!(
            did_you_mean("TRUE", ["None", "True", "False"]),
            Some("True")
        );
        assert_eq!(
            did_you_mean("conf", ["confidence", "items"]),
            Some("confidence")
        );
        assert_eq!(did_you_mean("max", ["max_rounds", "max_tokens"]), None);
        assert_eq!(
            did_you_mean("confidence_score", ["confidence"]),
            Some("confidence")
        );
    }

    #[test]
    fn ties_do_not_depend_on_order() {
        assert_eq!(did_you_mean("cat", ["bat", "car"]), Some("bat"));
        assert_eq!(did_you_mean("cat", ["car", "bat"]), Some("bat"));
    }

    #[test]
    fn long_names_cost_nothing() {
        let long = "a".repeat(1_000_000);
        let other = "b".repeat(1_000_000);
        assert_eq!(did_you_mean(&long, [other.as_str(), "a"]), None);
    }
}
