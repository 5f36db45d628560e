//! The catalogue of built-in functions and methods: names, arities, signatures and one-line
//! docs. The checker checks calls against it, the VM implements exactly this list, and the
//! language server shows the docs.
//!
//! Signatures are written in the type notation of [`crate::types`], with `[…]` around
//! optional arguments, `iterable` for a list, string, record (its keys), generator or `any`,
//! and `T` for the item type.
//!
//! The functions are `len bool int str any all min max file_exists file_contains
//! no_file_conflicts plan_completion vocabulary_compliance` (the last three are the reference's
//! verdict built-ins, with its semantics);
//! the methods are, on strings, `lower upper strip lstrip rstrip startswith endswith split
//! count find replace join isdigit isalpha isspace isupper islower`, on lists `count index`,
//! and on records `get keys values`. A few Python built-ins that specs reach for are
//! deliberately not provided ([`NOT_PROVIDED`]): the reference runtime did not provide them
//! either. [`NOT_SUPPORTED`] lists the reference's `ensure` built-ins that cannot be provided
//! with its meaning: none today, but the list (and E0049) stays for the next one.

/// A built-in function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Function {
    pub name: &'static str,
    /// As shown to users: `len(value: string | list | record) -> int`.
    pub signature: &'static str,
    pub min_args: usize,
    /// `None`: any number of arguments from `min_args` on.
    pub max_args: Option<usize>,
    pub doc: &'static str,
}

/// The types whose values have methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Receiver {
    String,
    List,
    Record,
}

impl Receiver {
    pub const ALL: [Receiver; 3] = [Receiver::String, Receiver::List, Receiver::Record];

    /// The receiver type as written in messages: `string`, `list`, `record`.
    pub fn name(self) -> &'static str {
        match self {
            Receiver::String => "string",
            Receiver::List => "list",
            Receiver::Record => "record",
        }
    }
}

/// A method of strings, lists or records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Method {
    pub receiver: Receiver,
    pub name: &'static str,
    /// As shown to users: `string.split([sep: string[, maxsplit: int]]) -> list<string>`.
    pub signature: &'static str,
    pub min_args: usize,
    pub max_args: usize,
    pub doc: &'static str,
}

/// A Python built-in that is deliberately not provided, with what to write instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotProvided {
    pub name: &'static str,
    /// The alternative, as a help line; `None` when there is none.
    pub alternative: Option<&'static str>,
}

const fn function(
    name: &'static str,
    signature: &'static str,
    min_args: usize,
    max_args: Option<usize>,
    doc: &'static str,
) -> Function {
    Function {
        name,
        signature,
        min_args,
        max_args,
        doc,
    }
}

const fn method(
    receiver: Receiver,
    name: &'static str,
    signature: &'static str,
    (min_args, max_args): (usize, usize),
    doc: &'static str,
) -> Method {
    Method {
        receiver,
        name,
        signature,
        min_args,
        max_args,
        doc,
    }
}

/// Every built-in function.
pub static FUNCTIONS: [Function; 13] = [
    function(
        "len",
        "len(value: string | list | record) -> int",
        1,
        Some(1),
        "The number of characters of a string, items of a list or fields of a record.",
    ),
    function(
        "bool",
        "bool(value) -> bool",
        1,
        Some(1),
        "Whether the value is truthy: not `None`, `False`, zero or empty.",
    ),
    function(
        "int",
        "int(value: int | float | string | bool) -> int",
        1,
        Some(1),
        "The value as an integer: a float truncated toward zero, a string of digits parsed, a bool as 0 or 1.",
    ),
    function(
        "str",
        "str(value) -> string",
        1,
        Some(1),
        "The value as text, written as Python's `str` writes it.",
    ),
    function(
        "any",
        "any(items: iterable) -> bool",
        1,
        Some(1),
        "Whether at least one item is truthy; `False` when there are no items.",
    ),
    function(
        "all",
        "all(items: iterable) -> bool",
        1,
        Some(1),
        "Whether every item is truthy; `True` when there are no items.",
    ),
    function(
        "min",
        "min(items: iterable) -> T  or  min(a: T, b: T, ...) -> T",
        1,
        None,
        "The smallest item of one iterable argument, or the smallest of two or more arguments; an error when there are no items.",
    ),
    function(
        "max",
        "max(items: iterable) -> T  or  max(a: T, b: T, ...) -> T",
        1,
        None,
        "The largest item of one iterable argument, or the largest of two or more arguments; an error when there are no items.",
    ),
    function(
        "file_exists",
        "file_exists(path: string) -> bool",
        1,
        Some(1),
        "Whether a file exists at `path`.",
    ),
    function(
        "file_contains",
        "file_contains(path: string, substring: string) -> bool",
        2,
        Some(2),
        "Whether the file at `path` exists and its text contains `substring`.",
    ),
    function(
        "no_file_conflicts",
        "no_file_conflicts(tasks: list<record>) -> bool",
        1,
        Some(1),
        "Whether no two tasks that are independent (neither reaches the other through `depends_on`, directly or not) own a file in common in `files_owned`; the first conflict fails the `ensure`, naming the two tasks and their files.",
    ),
    function(
        "plan_completion",
        "plan_completion(plan_items: list<record>, files_changed: list<string>[, threshold: float]) -> bool",
        2,
        Some(3),
        "Whether the plan is done: an item whose `file` is not in `files_changed` is missing, no missing item may be `critical`, and at least `threshold` percent (default 90) of the items must be done; otherwise each missing item is a violation of its own.",
    ),
    function(
        "vocabulary_compliance",
        "vocabulary_compliance(path: string, files_changed: list<string>[, git_fallback: bool[, base: string]]) -> bool",
        2,
        Some(4),
        "Whether the changed files use no alias that the vocabulary at `path` (canonical names, each with the aliases it `reject`s and a `reason`) rejects; each whole-word use is a violation of its own. With `git_fallback` and no files, the files git sees changed since `base` (default `HEAD`) are scanned. Arguments by position only.",
    ),
];

/// Every method, grouped by receiver.
pub static METHODS: [Method; 22] = [
    method(
        Receiver::String,
        "lower",
        "string.lower() -> string",
        (0, 0),
        "The string in lower case.",
    ),
    method(
        Receiver::String,
        "upper",
        "string.upper() -> string",
        (0, 0),
        "The string in upper case.",
    ),
    method(
        Receiver::String,
        "strip",
        "string.strip([chars: string]) -> string",
        (0, 1),
        "The string without leading and trailing whitespace (or `chars`).",
    ),
    method(
        Receiver::String,
        "lstrip",
        "string.lstrip([chars: string]) -> string",
        (0, 1),
        "The string without leading whitespace (or `chars`).",
    ),
    method(
        Receiver::String,
        "rstrip",
        "string.rstrip([chars: string]) -> string",
        (0, 1),
        "The string without trailing whitespace (or `chars`).",
    ),
    method(
        Receiver::String,
        "startswith",
        "string.startswith(prefix: string | (string, ...)) -> bool",
        (1, 1),
        "Whether the string starts with `prefix`, or with one of a tuple of prefixes.",
    ),
    method(
        Receiver::String,
        "endswith",
        "string.endswith(suffix: string | (string, ...)) -> bool",
        (1, 1),
        "Whether the string ends with `suffix`, or with one of a tuple of suffixes.",
    ),
    method(
        Receiver::String,
        "split",
        "string.split([sep: string[, maxsplit: int]]) -> list<string>",
        (0, 2),
        "The parts of the string between `sep` (runs of whitespace when absent), splitting at most `maxsplit` times.",
    ),
    method(
        Receiver::String,
        "count",
        "string.count(sub: string) -> int",
        (1, 1),
        "The number of non-overlapping occurrences of `sub`.",
    ),
    method(
        Receiver::String,
        "find",
        "string.find(sub: string) -> int",
        (1, 1),
        "The index of the first occurrence of `sub`, or -1.",
    ),
    method(
        Receiver::String,
        "replace",
        "string.replace(old: string, new: string) -> string",
        (2, 2),
        "The string with every occurrence of `old` replaced by `new`.",
    ),
    method(
        Receiver::String,
        "join",
        "string.join(items: iterable of string) -> string",
        (1, 1),
        "The items joined, with the string between each two.",
    ),
    method(
        Receiver::String,
        "isdigit",
        "string.isdigit() -> bool",
        (0, 0),
        "Whether the string is not empty and all its characters are digits.",
    ),
    method(
        Receiver::String,
        "isalpha",
        "string.isalpha() -> bool",
        (0, 0),
        "Whether the string is not empty and all its characters are letters.",
    ),
    method(
        Receiver::String,
        "isspace",
        "string.isspace() -> bool",
        (0, 0),
        "Whether the string is not empty and all its characters are whitespace.",
    ),
    method(
        Receiver::String,
        "isupper",
        "string.isupper() -> bool",
        (0, 0),
        "Whether the string has letters and all of them are upper case.",
    ),
    method(
        Receiver::String,
        "islower",
        "string.islower() -> bool",
        (0, 0),
        "Whether the string has letters and all of them are lower case.",
    ),
    method(
        Receiver::List,
        "count",
        "list<T>.count(value: T) -> int",
        (1, 1),
        "The number of items equal to `value`.",
    ),
    method(
        Receiver::List,
        "index",
        "list<T>.index(value: T) -> int",
        (1, 1),
        "The index of the first item equal to `value`; an error when there is none.",
    ),
    method(
        Receiver::Record,
        "get",
        "record.get(key: string[, default: T]) -> T",
        (1, 2),
        "The field named `key`, or `default` (`None` when absent) when the record has no such field.",
    ),
    method(
        Receiver::Record,
        "keys",
        "record.keys() -> list<string>",
        (0, 0),
        "The names of the record's fields.",
    ),
    method(
        Receiver::Record,
        "values",
        "record.values() -> list<any>",
        (0, 0),
        "The values of the record's fields.",
    ),
];

/// Python built-ins that specs reach for but that are not provided.
pub static NOT_PROVIDED: [NotProvided; 10] = [
    NotProvided {
        name: "float",
        alternative: Some(
            "an `int` is accepted wherever a `float` is, and `/` always gives a float: compare the number directly",
        ),
    },
    NotProvided {
        name: "abs",
        alternative: Some("write `x if x >= 0 else -x`"),
    },
    NotProvided {
        name: "sum",
        alternative: Some(
            "to count the items that pass a test, write `len([x for x in items if test])`",
        ),
    },
    NotProvided {
        name: "sorted",
        alternative: Some("`min(...)` and `max(...)` give the smallest and the largest item"),
    },
    NotProvided {
        name: "round",
        alternative: Some(
            "compare with a tolerance instead, as in `0.69 <= x <= 0.71`, or truncate with `int(x)`",
        ),
    },
    NotProvided {
        name: "isinstance",
        alternative: Some(
            "the contract gives each value its type; to test for a missing value write `x is None`",
        ),
    },
    NotProvided {
        name: "list",
        alternative: Some("write a list comprehension: `[x for x in items]`"),
    },
    NotProvided {
        name: "dict",
        alternative: None,
    },
    NotProvided {
        name: "set",
        alternative: Some("to test membership, write `x in items` on the list itself"),
    },
    NotProvided {
        name: "getattr",
        alternative: Some(
            "read the field directly (`x.name`), or by a string key: `x['name']` or `x.get('name', default)`",
        ),
    },
];

/// The built-in function called `name`.
pub fn function_named(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|function| function.name == name)
}

/// The method `name` of `receiver`.
pub fn method_named(receiver: Receiver, name: &str) -> Option<&'static Method> {
    METHODS
        .iter()
        .find(|method| method.receiver == receiver && method.name == name)
}

/// The methods of `receiver`, in catalogue order.
pub fn methods_of(receiver: Receiver) -> impl Iterator<Item = &'static Method> {
    METHODS
        .iter()
        .filter(move |method| method.receiver == receiver)
}

/// Every method called `name`, whatever its receiver (`count` is a string's and a list's).
pub fn methods_named(name: &str) -> impl Iterator<Item = &'static Method> + '_ {
    METHODS.iter().filter(move |method| method.name == name)
}

/// A built-in of the reference runtime's `ensure` that this implementation does not support,
/// with why and what to write instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unsupported {
    pub name: &'static str,
    /// What the reference means by it, and why it is not here.
    pub reason: &'static str,
    /// What to write instead, as a help line.
    pub instead: &'static str,
}

/// The reference's extra `ensure` built-ins that cannot be provided faithfully: none since
/// `vocabulary_compliance` joined [`FUNCTIONS`] (as its `any`, `all`, `min`, `max`,
/// `no_file_conflicts` and `plan_completion` did). E0049 reports a call of one.
pub static NOT_SUPPORTED: [Unsupported; 0] = [];

/// The reference built-in `name`, if it is one of those not supported here.
pub fn not_supported(name: &str) -> Option<&'static Unsupported> {
    NOT_SUPPORTED.iter().find(|entry| entry.name == name)
}

/// The Python built-in `name`, if it is one of those deliberately not provided.
pub fn not_provided(name: &str) -> Option<&'static NotProvided> {
    NOT_PROVIDED.iter().find(|entry| entry.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_is_consistent() {
        for function in &FUNCTIONS {
            assert!(
                function
                    .signature
                    .starts_with(&format!("{}(", function.name))
            );
            assert!(function.max_args.is_none_or(|max| max >= function.min_args));
            assert!(not_provided(function.name).is_none());
            assert!(not_supported(function.name).is_none());
            assert!(function.doc.ends_with('.'));
        }
        for method in &METHODS {
            let receiver = method.receiver.name();
            assert!(
                method.signature.starts_with(receiver)
                    && method.signature.contains(&format!(".{}(", method.name)),
                "{}",
                method.signature
            );
            assert!(method.max_args >= method.min_args);
            assert!(method.doc.ends_with('.'));
            assert_eq!(
                METHODS
                    .iter()
                    .filter(|other| other.receiver == method.receiver && other.name == method.name)
                    .count(),
                1
            );
        }
        assert_eq!(methods_of(Receiver::String).count(), 17);
        assert_eq!(methods_named("count").count(), 2);
        assert!(function_named("len").is_some() && function_named("abs").is_none());
    }
}
