//! [`Limits`]: the bounds one evaluation runs within (instructions, value sizes, file sizes)
//! and what the host lends it: the project root, and the [`VocabularyReader`] (with the
//! [`Vocabulary`] it reads) that `vocabulary_compliance` needs, since this crate knows no YAML.
//!
//! Plain data, read by the VM, the fast path and the built-ins; it imports none of them
//! ([`vocabulary`](crate::vocabulary) re-exports the reader's types beside the built-in).

use std::fmt;
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
    pub vocabulary: Option<VocabularyReader>,
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

    pub fn with_vocabulary_reader(mut self, reader: VocabularyReader) -> Limits {
        self.vocabulary = Some(reader);
        self
    }
}

/// A vocabulary: canonical names in the file's order, each with the aliases it rejects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Vocabulary {
    pub entries: Vec<Canonical>,
}

/// One canonical name of a [`Vocabulary`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Canonical {
    pub name: String,
    /// The rejected aliases, in the file's order (never empty).
    pub reject: Vec<String>,
    /// Why the canonical name is preferred; empty when the file gives no reason.
    pub reason: String,
}

/// Reads a vocabulary file's text into a [`Vocabulary`] (no entries when it holds nothing), or
/// fails with the reference's message (`vocabulary.yaml schema error: …`). The host provides
/// it, since reading YAML is the compiler's business, not this crate's.
#[derive(Clone, Copy)]
pub struct VocabularyReader(pub fn(&str) -> Result<Vocabulary, String>);

impl fmt::Debug for VocabularyReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("VocabularyReader")
    }
}

impl PartialEq for VocabularyReader {
    fn eq(&self, other: &VocabularyReader) -> bool {
        std::ptr::fn_addr_eq(self.0, other.0)
    }
}

impl Eq for VocabularyReader {}
