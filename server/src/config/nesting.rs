//! A linear pre-scan that refuses YAML whose flow collections nest too deeply, before the
//! parser sees it.
//!
//! Why: libyaml (under `serde_yaml_ng`) keeps one "simple key" slot per open flow level and
//! revisits all of them at every token, so `[[[…]]]` nested `n` deep costs `n²`: 200 KB of
//! brackets took about a minute of CPU to refuse, during which the reload watcher stalled.
//! Real configurations nest a few levels (a descriptor tree written entirely in flow style
//! needs two per descriptor level, and descriptors nest at most [`super::MAX_DEPTH`] deep),
//! so [`MAX_FLOW_DEPTH`] leaves ample room and the parser only ever sees cheap input.
//!
//! The scan understands just enough YAML to count brackets that open or close a flow
//! collection: it skips comments, single- and double-quoted scalars, and brackets inside a
//! plain scalar in block context (`value: a[b`). It never accepts anything the parser would
//! refuse; it only refuses early what the parser would take quadratic time over.

/// The deepest nesting of flow collections (`[…]`, `{…}`) accepted.
pub const MAX_FLOW_DEPTH: usize = 64;

/// Where the first bracket beyond [`MAX_FLOW_DEPTH`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

/// Whether a quote starting here is inside a scalar (and so literal).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Single,
    Double,
}

/// Scans `text` once; `Err` at the first flow bracket nested deeper than [`MAX_FLOW_DEPTH`].
pub fn check(text: &str) -> Result<(), TooDeep> {
    let mut depth = 0usize;
    let mut quote = Quote::None;
    // True where a new token may start: line start, after whitespace, after an indicator.
    let mut token_start = true;
    let mut in_comment = false;
    let (mut line, mut column) = (1usize, 0usize);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        column += 1;
        if c == '\n' {
            line += 1;
            column = 0;
            in_comment = false;
            token_start = true;
            continue;
        }
        if in_comment {
            continue;
        }
        match quote {
            Quote::Single => {
                if c == '\'' {
                    if chars.peek() == Some(&'\'') {
                        chars.next(); // '' is an escaped quote
                        column += 1;
                    } else {
                        quote = Quote::None;
                    }
                }
                continue;
            }
            Quote::Double => {
                match c {
                    // An escape takes the next character with it (not a line break).
                    '\\' if chars.next_if(|&n| n != '\n').is_some() => column += 1,
                    '"' => quote = Quote::None,
                    _ => {}
                }
                continue;
            }
            Quote::None => {}
        }
        let flow = depth > 0;
        match c {
            ' ' | '\t' | '\r' => token_start = true,
            '#' if token_start => in_comment = true,
            '\'' if token_start => quote = Quote::Single,
            '"' if token_start => quote = Quote::Double,
            // In block context a bracket opens a collection only where a token starts;
            // inside a flow collection every bracket is structure.
            '[' | '{' if flow || token_start => {
                depth += 1;
                if depth > MAX_FLOW_DEPTH {
                    return Err(TooDeep { line, column });
                }
                token_start = true;
            }
            ']' | '}' if flow => {
                depth -= 1;
                token_start = true;
            }
            ',' if flow => token_start = true,
            // `- item`, `? key`, `key: value`: the indicator is followed by a space, which
            // sets `token_start` by itself; in flow, `{a:[` needs no space.
            ':' if flow => token_start = true,
            _ => token_start = false,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(n: usize) -> String {
        format!(
            "domain: x\ndescriptors: {}{}\n",
            "[".repeat(n),
            "]".repeat(n)
        )
    }

    #[test]
    fn flow_nesting_up_to_the_bound_passes() {
        assert_eq!(check(&nested(MAX_FLOW_DEPTH)), Ok(()));
    }

    #[test]
    fn one_level_more_is_refused_where_it_starts() {
        assert_eq!(
            check(&nested(MAX_FLOW_DEPTH + 1)),
            Err(TooDeep {
                line: 2,
                column: 14 + MAX_FLOW_DEPTH
            })
        );
    }

    #[test]
    fn the_200_kb_bomb_is_refused() {
        let bomb = nested(100_000);
        assert!(bomb.len() > 200_000);
        assert!(check(&bomb).is_err());
        let mixed = format!("a: {}", "{b: [".repeat(40_000));
        assert!(check(&mixed).is_err());
    }

    #[test]
    fn brackets_that_are_not_structure_do_not_count() {
        let deep = "[".repeat(MAX_FLOW_DEPTH + 1);
        for text in [
            format!("key: '{deep}'\n"),
            format!("key: \"{deep}\"\n"),
            format!("key: \"\\\"{deep}\"\n"),
            format!("key: 'it''s {deep}'\n"),
            format!("key: a{deep}\n"),
            format!("key: a # {deep}\n"),
            format!("# {deep}\nkey: b\n"),
            format!("list: [\"{deep}\", '{deep}', a]\n"),
        ] {
            assert_eq!(check(&text), Ok(()), "{text}");
        }
    }

    #[test]
    fn a_flow_style_configuration_passes() {
        let text = "domain: web\ndescriptors: [{key: a, rate_limit: {unit: second, \
                    requests_per_unit: 1}, descriptors: [{key: b, value: '[x'}]}]\n";
        assert_eq!(check(text), Ok(()));
    }
}
