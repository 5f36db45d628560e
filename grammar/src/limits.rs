//! [`Limits`]: the bounds one evaluation runs within (instructions, value sizes, file sizes)
//! and what the host lends it (the project root, the vocabulary reader).
//!
//! Plain data, read by the VM, the fast path and the built-ins; it imports none of them, only
//! the type of the host's [`VocabularyReader`](crate::vocabulary::VocabularyReader).

use std::path::PathBuf;

/// The bounds of one evaluation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Instructions one evaluation may execute; built-ins charge per element (and per 64
    /// bytes of text) they walk.
    pub instructions: u64,
    /// The largest string or list (approximate bytes) an evaluation may build with `+`, `*`,
    /// `str`, `join`, `split`, `replace`, a comprehension, ….
    pub max_value_bytes: usize,
    /// The project root that `file_exists` / `file_contains` paths resolve against; without
    /// one they fail.
    pub root: Option<PathBuf>,
    /// `file_contains` is False for a file larger than this (the reference: 10 MiB), and
    /// `vocabulary_compliance` skips it.
    pub max_file_bytes: u64,
    /// How `vocabulary_compliance` reads a vocabulary file's YAML: the host's (this crate
    /// knows no YAML); without one that built-in fails once it finds a vocabulary.
    pub vocabulary: Option<crate::vocabulary::VocabularyReader>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            instructions: 1_000_000,
            max_value_bytes: 10 * 1024 * 1024,
            root: None,
            max_file_bytes: 10 * 1024 * 1024,
            vocabulary: None,
        }
    }
}

impl Limits {
    pub fn with_root(mut self, root: impl Into<PathBuf>) -> Limits {
        self.root = Some(root.into());
        self
    }

    pub fn with_vocabulary_reader(mut self, reader: crate::vocabulary::VocabularyReader) -> Limits {
        self.vocabulary = Some(reader);
        self
    }
}
