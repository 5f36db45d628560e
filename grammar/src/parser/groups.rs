//! Where each bracket's group ends, found in one pass over the tokens before parsing.
//!
//! Where the grammar fails inside brackets, it recovers by skipping the whole group, from the
//! opening bracket to its closing one, brackets of every kind nested properly in between (what
//! chumsky's `nested_delimiters` matches). Searching for that end at every failing bracket
//! scans the rest of the text once per bracket still open around the failure; this table
//! answers from one pass, so that recovery costs one step per skipped token, and nothing at
//! a bracket that is never closed.

use crate::lexer::Tok;
use crate::span::Span;

/// The end (the closing bracket's end offset) of every opening bracket's group, or `None`
/// where the group does not close: the text ends first, or a closing bracket of another kind
/// comes first, inside it or at its end.
#[derive(Debug, Default)]
pub(super) struct Groups {
    /// By the opening bracket's start offset, in order.
    ends: Vec<(u32, Option<u32>)>,
}

impl Groups {
    pub(super) fn find(tokens: &[(Tok, Span)]) -> Groups {
        let mut ends = Vec::new();
        // The opening brackets not closed yet: their kind and their index in `ends`.
        let mut open: Vec<(&Tok, usize)> = Vec::new();
        for (tok, span) in tokens {
            match tok {
                Tok::LParen | Tok::LBracket | Tok::LBrace => {
                    open.push((tok, ends.len()));
                    ends.push((span.start, None));
                }
                Tok::RParen | Tok::RBracket | Tok::RBrace => match open.pop() {
                    Some((opener, index)) if closes(opener, tok) => {
                        if let Some((_, end)) = ends.get_mut(index) {
                            *end = Some(span.end);
                        }
                    }
                    // A closing bracket of another kind: the innermost group cannot skip past
                    // it, so none around it can either; those after it are new groups.
                    Some(_) => open.clear(),
                    None => {}
                },
                _ => {}
            }
        }
        Groups { ends }
    }

    /// The end of the group that the bracket starting at `start` opens.
    pub(super) fn end(&self, start: u32) -> Option<u32> {
        let index = self
            .ends
            .binary_search_by_key(&start, |(opener, _)| *opener)
            .ok()?;
        self.ends.get(index).and_then(|(_, end)| *end)
    }
}

fn closes(opener: &Tok, closer: &Tok) -> bool {
    matches!(
        (opener, closer),
        (Tok::LParen, Tok::RParen) | (Tok::LBracket, Tok::RBracket) | (Tok::LBrace, Tok::RBrace)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::lex;

    /// Each opening bracket's group, as text, or `-` where it does not close.
    fn groups(src: &str) -> Vec<String> {
        let tokens = lex(src).tokens;
        let groups = Groups::find(&tokens);
        tokens
            .iter()
            .filter(|(tok, _)| matches!(tok, Tok::LParen | Tok::LBracket | Tok::LBrace))
            .map(|(_, span)| match groups.end(span.start) {
                Some(end) => src
                    .get(span.start as usize..end as usize)
                    .unwrap_or("?")
                    .to_owned(),
                None => "-".to_owned(),
            })
            .collect()
    }

    #[test]
    fn groups_close_as_nested_delimiters_close_them() {
        assert_eq!(groups("f(a[0], {b})"), ["(a[0], {b})", "[0]", "{b}"]);
        assert_eq!(groups("(a"), ["-"]);
        assert_eq!(groups("((a)"), ["-", "(a)"]);
        // A closing bracket of another kind ends every group open around it.
        assert_eq!(groups("( [ ) ]"), ["-", "-"]);
        assert_eq!(groups("(a]) (b)"), ["-", "(b)"]);
        assert_eq!(groups(") (a) ]"), ["(a)"]);
        assert_eq!(groups("[(]) [x]"), ["-", "-", "[x]"]);
    }
}
