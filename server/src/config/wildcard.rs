//! Descriptor values with `*` anywhere (`foo*`, `bar*b`, `foo*bar*baz`), as the reference
//! service matches them: each `*` stands for any run of characters, empty included.
//!
//! Why linear: a value comes from a client and a pattern may hold many `*`. Backtracking
//! glob matchers take exponential time on `a*a*a*…b`. With `*` as the only special
//! character there is no need to backtrack: the first literal part must start the value,
//! the last must end it, and each part in between is taken at its leftmost occurrence
//! after the previous one (taking a later occurrence can only leave less room for the
//! rest). Each part is found with `str::find`, linear in the text it scans, so a match
//! costs about the value's length times the pattern's part count, and allocates nothing.

/// A value pattern split on `*` once, at load time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// The value as written, e.g. `foo*bar*baz`.
    text: String,
    /// The literal parts between the stars (`["foo", "bar", "baz"]`); at least two.
    parts: Vec<String>,
}

impl Pattern {
    /// The pattern of `value`, or `None` when it has no `*` (an exact value).
    pub fn new(value: &str) -> Option<Pattern> {
        if !value.contains('*') {
            return None;
        }
        Some(Pattern {
            text: value.to_owned(),
            parts: value.split('*').map(str::to_owned).collect(),
        })
    }

    /// The value as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `value` matches, in time linear in `value` per part, without allocating.
    pub fn matches(&self, value: &str) -> bool {
        let (Some((first, rest)), Some(last)) = (self.parts.split_first(), self.parts.last())
        else {
            return false;
        };
        let Some(middle) = rest.split_last().map(|(_, m)| m) else {
            return false;
        };
        if middle.is_empty() && last.is_empty() {
            // `prefix*`, the common case: a prefix test alone.
            return value.starts_with(first.as_str());
        }
        // The first part starts the value and the last ends it, without overlapping.
        if value.len() < first.len() + last.len()
            || !value.starts_with(first.as_str())
            || !value.ends_with(last.as_str())
        {
            return false;
        }
        let mut between = &value[first.len()..value.len() - last.len()];
        for part in middle {
            match between.find(part.as_str()) {
                Some(at) => between = &between[at + part.len()..],
                None => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::Pattern;
    use proptest::prelude::*;

    fn p(s: &str) -> Pattern {
        Pattern::new(s).unwrap()
    }

    #[test]
    fn a_value_without_a_star_is_not_a_pattern() {
        assert_eq!(Pattern::new("foo"), None);
    }

    #[test]
    fn stars_anywhere() {
        assert!(p("foo*").matches("foo"));
        assert!(p("foo*").matches("foobar"));
        assert!(!p("foo*").matches("fo"));
        assert!(p("*").matches(""));
        assert!(p("bar*b").matches("barb"));
        assert!(p("bar*b").matches("bar-xyz-b"));
        assert!(!p("bar*b").matches("bar"), "the parts must not overlap");
        assert!(!p("bar*b").matches("barbx"));
        assert!(p("foo*bar*baz").matches("foobarbaz"));
        assert!(p("foo*bar*baz").matches("foo-1-bar-2-baz"));
        assert!(!p("foo*bar*baz").matches("foo-baz-bar"));
        assert!(p("*x*").matches("axb"));
        assert!(!p("*x*").matches("ab"));
        assert!(p("a**b").matches("ab"));
    }

    #[test]
    fn many_stars_on_a_long_value_stay_fast() {
        // `a*a*…*a*b` against a long run of `a`: exponential for a backtracking matcher.
        let pattern = p(&format!("{}b", "a*".repeat(1000)));
        let value = "a".repeat(100_000);
        let started = std::time::Instant::now();
        assert!(!pattern.matches(&value));
        // Not a speed target (those live in benchmarks): a guard against backtracking,
        // which would not finish at all.
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    /// The definition, by brute force: a `*` takes some split of the rest of the value.
    fn model(parts: &[&str], value: &str) -> bool {
        match parts {
            [] => value.is_empty(),
            [only] => value == *only,
            [first, rest @ ..] => {
                value.starts_with(first)
                    && (first.len()..=value.len())
                        .filter(|&i| value.is_char_boundary(i))
                        .any(|i| model_star(rest, &value[i..]))
            }
        }
    }

    /// `value` after a `*`: it matches `parts` from some position on.
    fn model_star(parts: &[&str], value: &str) -> bool {
        (0..=value.len())
            .filter(|&i| value.is_char_boundary(i))
            .any(|i| model(parts, &value[i..]))
    }

    proptest! {
        #[test]
        fn matches_like_the_definition(
            pattern in "[ab*]{1,8}".prop_filter("has a star", |s| s.contains('*')),
            value in "[ab]{0,10}",
        ) {
            let parts: Vec<&str> = pattern.split('*').collect();
            prop_assert_eq!(p(&pattern).matches(&value), model(&parts, &value));
        }
    }
}
