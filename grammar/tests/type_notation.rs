//! The type notation: whatever `Display` writes, `FromStr` reads back to an equal type.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use proptest::prelude::*;
use stratum_grammar::{Literal, Record, RecordField, Type};

fn literal() -> impl Strategy<Value = Literal> {
    prop_oneof![
        any::<String>().prop_map(Literal::Str),
        "[a-z' \"\\\\]{0,6}".prop_map(Literal::Str),
        any::<i64>().prop_map(Literal::Int),
        prop::num::f64::NORMAL.prop_map(Literal::Float),
        (-1000i32..1000).prop_map(|n| Literal::Float(f64::from(n) / 8.0)),
        any::<bool>().prop_map(Literal::Bool),
    ]
}

fn field_name() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z_][a-z0-9_]{0,8}", any::<String>()]
}

fn ty() -> impl Strategy<Value = Type> {
    let leaf = prop_oneof![
        Just(Type::Any),
        Just(Type::Null),
        Just(Type::Bool),
        Just(Type::Int),
        Just(Type::Float),
        Just(Type::String),
        prop::collection::vec(literal(), 0..4).prop_map(Type::enumeration),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(Type::list),
            inner.clone().prop_map(|ty| Type::Optional(Box::new(ty))),
            (
                prop::collection::vec((field_name(), inner), 0..4),
                any::<bool>()
            )
                .prop_map(|(fields, open)| Type::record(Record {
                    fields: fields
                        .into_iter()
                        .map(|(name, ty)| RecordField { name, ty })
                        .collect(),
                    open,
                })),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn display_parses_back(ty in ty()) {
        let text = ty.to_string();
        let parsed: Result<Type, _> = text.parse();
        prop_assert_eq!(parsed.as_ref(), Ok(&ty), "text: {}", text);
    }

    #[test]
    fn parsing_never_panics(text in "[a-z<>{}()|?,:.' \"0-9-]{0,40}") {
        let _ = text.parse::<Type>();
    }
}

#[test]
fn examples_from_the_docs() {
    for text in [
        "any",
        "list<string>",
        "{confidence: float, items: list<string>}",
        "{name: string, ...}",
        "'low' | 'high'",
        "('a' | 'b')?",
        "float?",
    ] {
        let ty: Type = text.parse().unwrap();
        assert_eq!(ty.to_string().parse::<Type>().unwrap(), ty, "{text}");
    }
}
