//! One contract field or `input` field definition → its [`FieldType`].
//!
//! Takes a [`FieldDef`] (its `type:` text, `items`, `values`, `optional`/`required` and range
//! keys) and the names of the spec's contracts; returns the field's type and the contract names
//! it references, with their spans. Reports E0070 (unknown type, bad type syntax), E0072
//! (ranges), E0074 (`values` and `items` that do not fit the type), E0021 (empty `values`) and,
//! inside an `items` mapping, which the front end keeps as written, W0001 and E0012 as the front
//! end reports them for field mappings.
//!
//! Invariant: a problem makes the affected part `any` (or drops the constraint) after its one
//! diagnostic; no check runs on a part that is already `any`, so there are no cascades.

use std::collections::HashSet;
use std::ops::Range;

use crate::diagnostic::{Code, Diagnostic, backticked, did_you_mean};
use crate::sema::contract_type::{self, LiteralText, Number, RangeText, TypeText};
use crate::sema::field_type::{Bounds, FieldType, Literal};
use crate::source::Span;
use crate::syntax::ast::{Field, FieldDef};
use crate::syntax::tree::{Node, NodeKind};

/// The built-in type names, every accepted spelling.
pub const BUILT_IN_TYPES: &[&str] = &[
    "string", "number", "float", "integer", "int", "boolean", "bool", "array", "object",
];

/// Names from other languages that mean one of ours.
const FOREIGN_NAMES: &[(&str, &str)] = &[
    ("list", "array"),
    ("dict", "object"),
    ("map", "object"),
    ("double", "number"),
    ("long", "integer"),
    ("text", "string"),
    ("str", "string"),
];

/// The keys of an `items` mapping: those of a field definition.
const ITEM_KEYS: &[&str] = &[
    "type",
    "values",
    "items",
    "optional",
    "required",
    "description",
    "default",
    "minimum",
    "maximum",
    "min_length",
    "max_length",
];

/// A reference to a contract from a field type.
#[derive(Clone, Debug, PartialEq)]
pub struct Use {
    pub name: String,
    pub span: Span,
}

pub struct Resolver<'a> {
    /// Contract names in declaration order, for suggestions.
    contracts: &'a [&'a str],
    known: HashSet<&'a str>,
    diagnostics: &'a mut Vec<Diagnostic>,
    uses: Vec<Use>,
}

/// Offsets inside a decoded scalar → spans in the file, when the scalar is written so that
/// they map exactly: plain (same length) or quoted without escapes (two bytes longer). Any
/// other form maps every offset to the whole scalar: coarse, never wrong.
#[derive(Clone, Copy)]
struct TextSpans {
    whole: Span,
    shift: Option<u32>,
}

impl TextSpans {
    fn new(text: &str, span: Span) -> TextSpans {
        let shift = match span.len().checked_sub(text.len()) {
            Some(0) => Some(0),
            Some(2) => Some(1),
            _ => None,
        };
        TextSpans { whole: span, shift }
    }

    fn at(&self, range: Range<usize>) -> Span {
        match self.shift {
            Some(shift) => {
                let start = self.whole.start as usize + shift as usize;
                Span::new(self.whole.file, start + range.start..start + range.end)
            }
            None => self.whole,
        }
    }

    /// Whether `range` maps to exactly its own bytes (or is the whole text), so that a fix may
    /// replace it.
    fn is_exact(&self, range: &Range<usize>, text: &str) -> bool {
        self.shift.is_some() || (range.start == 0 && range.end == text.len())
    }
}

/// The type a `type:` text declares, before `items`, `values` and range keys apply.
struct Declared {
    ty: FieldType,
    /// The range written in the text (`int[1..5]`), if any.
    range: Option<Span>,
    /// Written as the name `array` (so `items` may type its elements).
    untyped_array: bool,
    /// Written as a literal union (so `values` would repeat it).
    literal_union: bool,
}

impl<'a> Resolver<'a> {
    pub fn new(contracts: &'a [&'a str], diagnostics: &'a mut Vec<Diagnostic>) -> Resolver<'a> {
        Resolver {
            contracts,
            known: contracts.iter().copied().collect(),
            diagnostics,
            uses: Vec::new(),
        }
    }

    /// The type of one field definition and the contracts it names.
    pub fn field(&mut self, def: &FieldDef) -> (FieldType, Vec<Use>) {
        let ty = self.definition(def);
        (ty, std::mem::take(&mut self.uses))
    }

    fn definition(&mut self, def: &FieldDef) -> FieldType {
        let declared = def.ty.as_ref().map(|ty| self.type_text(&ty.value, ty.span));
        // What the type says before `values`; an input without `type` is `any` until `values`
        // or `items` say more.
        let mut declared = declared.unwrap_or(Declared {
            ty: FieldType::Any,
            range: None,
            untyped_array: def.ty.is_none() && def.items.is_some(),
            literal_union: false,
        });
        if let Some(items) = &def.items {
            declared.ty = self.items(declared.ty, declared.untyped_array, items);
        }
        let mut ty = match &def.values {
            Some(values) => self.values(&declared, def.ty.is_none(), values),
            None => declared.ty,
        };
        ty = self.range_keys(ty, declared.range, def);
        let optional = def.optional.as_ref().is_some_and(|f| f.value)
            || def.required.as_ref().is_some_and(|f| !f.value);
        if optional { ty.optional() } else { ty }
    }

    // ----- the `type:` text ------------------------------------------------------------------

    fn type_text(&mut self, text: &str, span: Span) -> Declared {
        let spans = TextSpans::new(text, span);
        let parsed = match contract_type::parse(text) {
            Ok(parsed) => parsed,
            Err(error) => {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E0070,
                        format!("`{text}` is not a valid type: {}", error.message),
                        spans.at(error.span),
                        error.label,
                    )
                    .help(
                        "write a type name (`string`, `integer`, a contract, …), optionally \
                         with a range (`int[1..100]`), `?` (optional) or `[]` (list), or a \
                         union of literals (`\"low\" | \"high\"`)",
                    ),
                );
                return Declared {
                    ty: FieldType::Any,
                    range: None,
                    untyped_array: false,
                    literal_union: false,
                };
            }
        };
        let untyped_array = matches!(
            strip_optional(&parsed),
            TypeText::Named { name, range: None, .. } if name == "array"
        );
        let literal_union = matches!(strip_optional(&parsed), TypeText::Literals(_));
        let mut range = None;
        let ty = self.type_tree(&parsed, text, &spans, &mut range);
        Declared {
            ty,
            range,
            untyped_array,
            literal_union,
        }
    }

    fn type_tree(
        &mut self,
        ty: &TypeText,
        text: &str,
        spans: &TextSpans,
        range_span: &mut Option<Span>,
    ) -> FieldType {
        match ty {
            TypeText::Named { name, span, range } => {
                let resolved = self.name(name, span.clone(), text, spans);
                match range {
                    Some(range) => {
                        *range_span = Some(spans.at(range.span.clone()));
                        self.text_range(resolved, name, range, spans)
                    }
                    None => resolved,
                }
            }
            TypeText::Literals(literals) => self.literal_union(literals, spans),
            TypeText::List(item, _) => {
                let item = self.type_tree(item, text, spans, range_span);
                FieldType::Array(Some(Box::new(item)))
            }
            TypeText::Optional(inner, _) => {
                self.type_tree(inner, text, spans, range_span).optional()
            }
        }
    }

    fn name(
        &mut self,
        name: &str,
        range: Range<usize>,
        text: &str,
        spans: &TextSpans,
    ) -> FieldType {
        match name {
            "string" => return FieldType::String(Bounds::default()),
            "number" | "float" => return FieldType::Number(Bounds::default()),
            "integer" | "int" => return FieldType::Integer(Bounds::default()),
            "boolean" | "bool" => return FieldType::Boolean,
            "array" => return FieldType::Array(None),
            "object" => return FieldType::Object,
            _ => {}
        }
        let span = spans.at(range.clone());
        if self.known.contains(name) {
            self.uses.push(Use {
                name: name.to_owned(),
                span,
            });
            return FieldType::Contract(name.to_owned());
        }
        let suggestion = FOREIGN_NAMES
            .iter()
            .find(|(foreign, _)| foreign.eq_ignore_ascii_case(name))
            .map(|(_, ours)| *ours)
            .or_else(|| {
                did_you_mean(
                    name,
                    BUILT_IN_TYPES.iter().chain(self.contracts.iter()).copied(),
                )
            });
        let mut diagnostic = Diagnostic::new(
            Code::E0070,
            format!("unknown type `{name}`"),
            span,
            "not a type or contract",
        );
        diagnostic = match suggestion {
            Some(best) => {
                let help = format!("did you mean `{best}`?");
                if spans.is_exact(&range, text) {
                    diagnostic
                        .help(help)
                        .fix(format!("replace `{name}` with `{best}`"), span, best)
                } else {
                    diagnostic.help(help)
                }
            }
            None if self.contracts.is_empty() => diagnostic.help(
                "the built-in types are `string`, `number`, `integer`, `boolean`, `array` and \
                 `object`; this spec declares no contracts",
            ),
            None => diagnostic.help(format!(
                "the built-in types are `string`, `number`, `integer`, `boolean`, `array` and \
                 `object`; the contracts are {}",
                backticked(self.contracts)
            )),
        };
        self.diagnostics.push(diagnostic);
        FieldType::Any
    }

    /// `float[0.0..1.0]`, `int[1..100]`, `string[1..500]`.
    fn text_range(
        &mut self,
        ty: FieldType,
        name: &str,
        range: &RangeText,
        spans: &TextSpans,
    ) -> FieldType {
        let span = spans.at(range.span.clone());
        let bound_span = |bound: &Option<Range<usize>>| {
            bound.as_ref().map_or(span, |bound| spans.at(bound.clone()))
        };
        let low_span = bound_span(&range.low_span);
        let high_span = bound_span(&range.high_span);
        match ty {
            FieldType::Number(_) => {
                let bounds = Bounds {
                    minimum: range.low.map(Number::as_f64),
                    maximum: range.high.map(Number::as_f64),
                };
                for (bound, at) in [(bounds.minimum, low_span), (bounds.maximum, high_span)] {
                    if bound.is_some_and(|b| !b.is_finite()) {
                        self.diagnostics.push(not_finite(at));
                        return FieldType::Number(Bounds::default());
                    }
                }
                self.check_order(bounds, Some(span), None, "range");
                FieldType::Number(bounds)
            }
            FieldType::Integer(_) => {
                let mut bounds = Bounds::default();
                for (bound, at, slot) in [
                    (range.low, low_span, &mut bounds.minimum),
                    (range.high, high_span, &mut bounds.maximum),
                ] {
                    match bound {
                        None => {}
                        Some(Number::Int(value)) => *slot = Some(value),
                        Some(Number::Float(value)) => match whole(value) {
                            Some(value) => *slot = Some(value),
                            None => {
                                self.diagnostics.push(not_whole(at, value, name));
                                return FieldType::Integer(Bounds::default());
                            }
                        },
                    }
                }
                self.check_order(bounds, Some(span), None, "range");
                FieldType::Integer(bounds)
            }
            FieldType::String(_) => {
                let mut bounds = Bounds::default();
                for (bound, at, slot) in [
                    (range.low, low_span, &mut bounds.minimum),
                    (range.high, high_span, &mut bounds.maximum),
                ] {
                    match bound {
                        None => {}
                        Some(Number::Int(value)) => match u64::try_from(value) {
                            Ok(value) => *slot = Some(value),
                            Err(_) => {
                                self.diagnostics.push(
                                    Diagnostic::new(
                                        Code::E0072,
                                        format!("a string length cannot be negative, not {value}"),
                                        at,
                                        "negative length",
                                    )
                                    .help("write 0 or more"),
                                );
                                return FieldType::String(Bounds::default());
                            }
                        },
                        Some(Number::Float(value)) => {
                            self.diagnostics.push(
                                Diagnostic::new(
                                    Code::E0072,
                                    format!(
                                        "a string length is a whole number of characters, \
                                         not {value}"
                                    ),
                                    at,
                                    "not a whole number",
                                )
                                .help("write the length as a whole number"),
                            );
                            return FieldType::String(Bounds::default());
                        }
                    }
                }
                self.check_order(bounds, Some(span), None, "length range");
                FieldType::String(bounds)
            }
            FieldType::Any => FieldType::Any,
            other => {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E0072,
                        format!("a range applies to numbers and strings, not to `{name}`"),
                        span,
                        "range on a non-number type",
                    )
                    .help(format!("remove the range, or use `{name}` without it")),
                );
                other
            }
        }
    }

    /// `"low" | "medium" | "high"`.
    fn literal_union(
        &mut self,
        literals: &[(LiteralText, Range<usize>)],
        spans: &TextSpans,
    ) -> FieldType {
        let mut values = Vec::with_capacity(literals.len());
        let mut first_kind = None;
        for (literal, range) in literals {
            let value = match literal {
                LiteralText::Str(value) => Literal::Str(value.clone()),
                LiteralText::Number(Number::Int(value)) => Literal::Int(*value),
                LiteralText::Number(Number::Float(value)) => Literal::Float(*value),
            };
            let kind = literal_kind(&value);
            match first_kind {
                None => first_kind = Some(kind),
                Some(first) if !same_kind(first, kind) => {
                    self.diagnostics.push(
                        Diagnostic::new(
                            Code::E0074,
                            format!("a union of literals mixes {}s and {}s", first, kind),
                            spans.at(range.clone()),
                            format!("{} {kind}", article_word(kind)),
                        )
                        .help("make every literal of the union the same kind: quote them all, or none"),
                    );
                    return FieldType::Any;
                }
                Some(_) => {}
            }
            values.push(value);
        }
        FieldType::Enum(values)
    }

    // ----- `items` -----------------------------------------------------------------------------

    fn items(
        &mut self,
        declared: FieldType,
        untyped_array: bool,
        items: &Field<Node>,
    ) -> FieldType {
        let optional = declared.is_optional();
        let wrap = |ty: FieldType| if optional { ty.optional() } else { ty };
        match (declared.required(), untyped_array) {
            (FieldType::Array(None), true) | (FieldType::Any, true) => {
                let item = self.item_type(&items.value);
                wrap(FieldType::Array(Some(Box::new(item))))
            }
            // Already reported, or an input without `type`.
            (FieldType::Any, false) => declared,
            (FieldType::Array(Some(item)), _) => {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E0074,
                        format!(
                            "`items` repeats the element type: the type already says `{}`",
                            declared.describe()
                        ),
                        items.key,
                        "element type given twice",
                    )
                    .help(format!(
                        "remove `items`, or write `type: array` and keep `items` (the element \
                         type is `{}`)",
                        item.describe()
                    )),
                );
                declared
            }
            (other, _) => {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E0074,
                        format!("`items` on a field of type `{}`", other.describe()),
                        items.key,
                        "only arrays have items",
                    )
                    .help("remove `items`, or make the field `type: array`"),
                );
                declared
            }
        }
    }

    /// The element type of `items:`: a type text (`string`, `Address`) or a mapping with the
    /// keys of a field definition (`{type: string, values: [a, b]}`).
    fn item_type(&mut self, node: &Node) -> FieldType {
        match &node.kind {
            NodeKind::Invalid => FieldType::Any,
            NodeKind::Str(s) => {
                let declared = self.type_text(&s.value, node.span);
                declared.ty
            }
            NodeKind::Map(entries) => {
                let Some(def) = self.item_definition(node, entries) else {
                    return FieldType::Any;
                };
                self.definition(&def)
            }
            _ => {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E0074,
                        format!(
                            "`items` must be a type or a field definition, not {}",
                            node.kind_name()
                        ),
                        node.span,
                        format!("this is {}", node.kind_name()),
                    )
                    .help(
                        "write the element type, e.g. `items: string` or `items: {type: string}`",
                    ),
                );
                FieldType::Any
            }
        }
    }

    /// Reads an `items` mapping as a field definition, as the front end reads a field.
    fn item_definition(
        &mut self,
        node: &Node,
        entries: &[crate::syntax::tree::Entry],
    ) -> Option<FieldDef> {
        let name = crate::syntax::ast::Spanned {
            value: "items".to_owned(),
            span: node.span,
        };
        let mut def = FieldDef::new(name, node.span);
        for entry in entries {
            let Some(key) = entry.key.as_str() else {
                continue;
            };
            let value = &entry.value;
            if matches!(value.kind, NodeKind::Invalid) {
                continue;
            }
            let (key_span, value_span) = (entry.key.span, value.span);
            fn field<T>(key: Span, span: Span, value: T) -> Option<Field<T>> {
                Some(Field { key, span, value })
            }
            match key {
                "type" => match value.as_str() {
                    Some(text) => def.ty = field(key_span, value_span, text.to_owned()),
                    None => self.wrong_type(value, "a string"),
                },
                "values" => match &value.kind {
                    NodeKind::Seq(values) => {
                        def.values = field(key_span, value_span, values.clone())
                    }
                    _ => self.wrong_type(value, "a list"),
                },
                "items" => def.items = field(key_span, value_span, value.clone()),
                "optional" | "required" => match value.kind {
                    NodeKind::Bool(b) if key == "optional" => {
                        def.optional = field(key_span, value_span, b)
                    }
                    NodeKind::Bool(b) => def.required = field(key_span, value_span, b),
                    _ => self.wrong_type(value, "`true` or `false`"),
                },
                "description" | "default" => {}
                "minimum" | "maximum" => {
                    let number = match value.kind {
                        // Bounds past 2^53 lose precision, as the front end's do.
                        #[allow(clippy::cast_precision_loss)]
                        NodeKind::Int(i) => Some(i as f64),
                        NodeKind::Float(f) => Some(f),
                        _ => None,
                    };
                    match number {
                        Some(n) if key == "minimum" => def.minimum = field(key_span, value_span, n),
                        Some(n) => def.maximum = field(key_span, value_span, n),
                        None => self.wrong_type(value, "a number"),
                    }
                }
                "min_length" | "max_length" => match value.kind {
                    NodeKind::Int(i) => match u64::try_from(i) {
                        Ok(n) if key == "min_length" => {
                            def.min_length = field(key_span, value_span, n)
                        }
                        Ok(n) => def.max_length = field(key_span, value_span, n),
                        Err(_) => self.diagnostics.push(
                            Diagnostic::new(
                                Code::E0072,
                                format!("a string length cannot be negative, not {i}"),
                                value.span,
                                "negative length",
                            )
                            .help("write 0 or more"),
                        ),
                    },
                    _ => self.wrong_type(value, "an integer"),
                },
                _ => {
                    let mut diagnostic = Diagnostic::new(
                        Code::W0001,
                        format!(
                            "`{key}` is not a known key of an `items` definition; it is ignored"
                        ),
                        entry.key.span,
                        "unknown key",
                    );
                    diagnostic = match did_you_mean(key, ITEM_KEYS.iter().copied()) {
                        Some(best) => diagnostic.help(format!("did you mean `{best}`?")).fix(
                            format!("rename to `{best}`"),
                            entry.key.span,
                            best,
                        ),
                        None => diagnostic.help(format!(
                            "the keys of an `items` definition are {}",
                            backticked(ITEM_KEYS)
                        )),
                    };
                    self.diagnostics.push(diagnostic);
                }
            }
        }
        Some(def)
    }

    fn wrong_type(&mut self, node: &Node, expected: &str) {
        self.diagnostics.push(
            Diagnostic::new(
                Code::E0012,
                format!("expected {expected}, found {}", node.kind_name()),
                node.span,
                format!("this is {}", node.kind_name()),
            )
            .help(format!("write {expected} here")),
        );
    }

    // ----- `values` ----------------------------------------------------------------------------

    fn values(
        &mut self,
        declared: &Declared,
        untyped: bool,
        values: &Field<Vec<Node>>,
    ) -> FieldType {
        let optional = declared.ty.is_optional();
        let core = declared.ty.required();
        let expected: Option<&'static str> = match core {
            FieldType::String(_) => Some("string"),
            FieldType::Integer(_) => Some("integer"),
            FieldType::Number(_) => Some("number"),
            FieldType::Boolean => Some("boolean"),
            FieldType::Any if untyped => None,
            // Reported already.
            FieldType::Any => return declared.ty.clone(),
            FieldType::Enum(_) if declared.literal_union => {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E0074,
                        "`values` repeats the literal union of `type`",
                        values.key,
                        "values given twice",
                    )
                    .help("keep either the union in `type` or `values`, not both"),
                );
                return declared.ty.clone();
            }
            other => {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E0074,
                        format!("`values` on a field of type `{}`", other.describe()),
                        values.key,
                        "only strings, numbers and booleans have values",
                    )
                    .help("remove `values`, or give the field a string, number, integer or boolean type"),
                );
                return declared.ty.clone();
            }
        };
        if values.value.is_empty() {
            self.diagnostics.push(
                Diagnostic::new(Code::E0021, "`values` is empty", values.span, "no values")
                    .help("list the allowed values, or remove `values` to allow any"),
            );
            return declared.ty.clone();
        }
        if let Some(range) = declared.range {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::E0072,
                    "a range on a field that lists its `values`",
                    range,
                    "range with values",
                )
                .secondary(values.key, "the values fix what is allowed")
                .help("remove the range; every allowed value is listed"),
            );
        }
        let mut literals = Vec::with_capacity(values.value.len());
        let mut first_kind: Option<&'static str> = None;
        for node in &values.value {
            let literal = match &node.kind {
                NodeKind::Invalid => continue,
                NodeKind::Str(s) => Literal::Str(s.value.clone()),
                NodeKind::Int(i) => Literal::Int(*i),
                NodeKind::Float(f) if f.is_finite() => Literal::Float(*f),
                NodeKind::Bool(b) => Literal::Bool(*b),
                NodeKind::Null => {
                    self.diagnostics.push(
                        Diagnostic::new(
                            Code::E0074,
                            "`null` cannot be one of the `values`",
                            node.span,
                            "null value",
                        )
                        .help("remove it and make the field optional (`optional: true`) instead"),
                    );
                    return declared.ty.clone();
                }
                _ => {
                    self.diagnostics.push(
                        Diagnostic::new(
                            Code::E0074,
                            format!("{} cannot be one of the `values`", node.kind_name()),
                            node.span,
                            "not a string, number or boolean",
                        )
                        .help("list strings, numbers or booleans"),
                    );
                    return declared.ty.clone();
                }
            };
            let kind = literal_kind(&literal);
            let fits = match expected {
                Some("string") => kind == "string",
                Some("integer") => kind == "integer",
                Some("number") => kind == "integer" || kind == "number",
                Some("boolean") => kind == "boolean",
                _ => first_kind.is_none_or(|first| same_kind(first, kind)),
            };
            if !fits {
                let diagnostic = match expected {
                    Some(expected) => Diagnostic::new(
                        Code::E0074,
                        format!(
                            "the value {} is {}, but the field is a `{expected}`",
                            shown(&literal),
                            article(kind)
                        ),
                        node.span,
                        format!("{} {kind}", article_word(kind)),
                    ),
                    None => Diagnostic::new(
                        Code::E0074,
                        format!(
                            "`values` mixes {}s and {kind}s",
                            first_kind.unwrap_or("string")
                        ),
                        node.span,
                        format!("{} {kind}", article_word(kind)),
                    ),
                };
                let diagnostic = match (&literal, expected) {
                    (Literal::Int(i), Some("string")) => diagnostic
                        .help("quote it to make it a string")
                        .fix(format!("quote `{i}`"), node.span, format!("\"{i}\"")),
                    (_, Some(expected)) => diagnostic.help(format!(
                        "list only {expected} values, or change the field's `type`"
                    )),
                    _ => diagnostic.help("list values of one kind, or declare the field's `type`"),
                };
                self.diagnostics.push(diagnostic);
                return declared.ty.clone();
            }
            first_kind.get_or_insert(kind);
            literals.push(literal);
        }
        let ty = FieldType::Enum(literals);
        if optional { ty.optional() } else { ty }
    }

    // ----- range keys --------------------------------------------------------------------------

    fn range_keys(&mut self, ty: FieldType, text_range: Option<Span>, def: &FieldDef) -> FieldType {
        let numeric = [&def.minimum, &def.maximum];
        let length = [&def.min_length, &def.max_length];
        let first_numeric = numeric.iter().find_map(|f| f.as_ref().map(|f| f.key));
        let first_length = length.iter().find_map(|f| f.as_ref().map(|f| f.key));
        if first_numeric.is_none() && first_length.is_none() {
            return ty;
        }
        let optional = ty.is_optional();
        let wrap = |ty: FieldType| if optional { ty.optional() } else { ty };
        let core = ty.required().clone();
        // Keys that do not fit the type.
        let misplaced = |kind: &str, key: Span, resolver: &mut Resolver<'_>, what: &str| {
            resolver.diagnostics.push(
                Diagnostic::new(
                    Code::E0072,
                    format!("{what} on a field of type `{kind}`"),
                    key,
                    format!(
                        "{what} needs a {}",
                        if what.starts_with("a length") {
                            "string"
                        } else {
                            "number"
                        }
                    ),
                )
                .help("remove the key, or change the field's `type`"),
            );
        };
        let twice = |key: Span, range: Span, resolver: &mut Resolver<'_>| {
            resolver.diagnostics.push(
                Diagnostic::new(
                    Code::E0072,
                    "the range is written twice, in `type` and in a key",
                    key,
                    "second range",
                )
                .secondary(range, "range in the type")
                .help("keep one of them: the range in `type` or the keys"),
            );
        };
        match core {
            FieldType::Any => ty,
            FieldType::Number(bounds) => {
                if let Some(key) = first_length {
                    misplaced("number", key, self, "a length range");
                }
                let Some(key) = first_numeric else { return ty };
                if let Some(range) = text_range {
                    twice(key, range, self);
                    return ty;
                }
                let Some(bounds) = self.key_bounds(def, bounds, |field| Ok(field.value)) else {
                    return ty;
                };
                self.check_order(
                    bounds,
                    key_span(&def.maximum),
                    def.minimum.as_ref().map(|f| f.span),
                    "range",
                );
                wrap(FieldType::Number(bounds))
            }
            FieldType::Integer(bounds) => {
                if let Some(key) = first_length {
                    misplaced("integer", key, self, "a length range");
                }
                let Some(key) = first_numeric else { return ty };
                if let Some(range) = text_range {
                    twice(key, range, self);
                    return ty;
                }
                let Some(bounds) = self.key_bounds(def, bounds, |field| {
                    whole(field.value)
                        .ok_or_else(|| Box::new(not_whole(field.span, field.value, "integer")))
                }) else {
                    return ty;
                };
                self.check_order(
                    bounds,
                    key_span(&def.maximum),
                    def.minimum.as_ref().map(|f| f.span),
                    "range",
                );
                wrap(FieldType::Integer(bounds))
            }
            FieldType::String(bounds) => {
                if let Some(key) = first_numeric {
                    misplaced("string", key, self, "a numeric range");
                }
                let Some(key) = first_length else { return ty };
                if let Some(range) = text_range {
                    twice(key, range, self);
                    return ty;
                }
                let mut bounds = bounds;
                bounds.minimum = def.min_length.as_ref().map(|f| f.value);
                bounds.maximum = def.max_length.as_ref().map(|f| f.value);
                self.check_order(
                    bounds,
                    key_span(&def.max_length),
                    def.min_length.as_ref().map(|f| f.span),
                    "length range",
                );
                wrap(FieldType::String(bounds))
            }
            FieldType::Enum(_) => {
                for key in [first_numeric, first_length].into_iter().flatten() {
                    self.diagnostics.push(
                        Diagnostic::new(
                            Code::E0072,
                            "a range on a field that lists its `values`",
                            key,
                            "range with values",
                        )
                        .help("remove the key; every allowed value is listed"),
                    );
                }
                ty
            }
            other => {
                let kind = other.describe();
                if let Some(key) = first_numeric {
                    misplaced(&kind, key, self, "a numeric range");
                }
                if let Some(key) = first_length {
                    misplaced(&kind, key, self, "a length range");
                }
                ty
            }
        }
    }

    /// `bounds` with the `minimum` and `maximum` keys read into it, each through `convert`
    /// (which says why a finite bound does not fit the type); `None` once a bound that is not
    /// finite, or does not fit, has been reported.
    fn key_bounds<T>(
        &mut self,
        def: &FieldDef,
        mut bounds: Bounds<T>,
        convert: impl Fn(&Field<f64>) -> Result<T, Box<Diagnostic>>,
    ) -> Option<Bounds<T>> {
        for (field, slot) in [
            (&def.minimum, &mut bounds.minimum),
            (&def.maximum, &mut bounds.maximum),
        ] {
            let Some(field) = field else { continue };
            if !field.value.is_finite() {
                self.diagnostics.push(not_finite(field.span));
                return None;
            }
            match convert(field) {
                Ok(value) => *slot = Some(value),
                Err(diagnostic) => {
                    self.diagnostics.push(*diagnostic);
                    return None;
                }
            }
        }
        Some(bounds)
    }

    /// E0072 when the minimum is above the maximum: on `at` (the maximum, or the whole range
    /// in a type text), with the minimum as a secondary label when it stands elsewhere.
    fn check_order<T: PartialOrd + std::fmt::Display + Copy>(
        &mut self,
        bounds: Bounds<T>,
        at: Option<Span>,
        minimum_at: Option<Span>,
        what: &str,
    ) -> bool {
        let (Some(minimum), Some(maximum), Some(at)) = (bounds.minimum, bounds.maximum, at) else {
            return true;
        };
        if minimum <= maximum {
            return true;
        }
        let mut diagnostic = Diagnostic::new(
            Code::E0072,
            format!("the {what} is empty: the minimum {minimum} is above the maximum {maximum}"),
            at,
            if minimum_at.is_some() {
                "below the minimum"
            } else {
                "empty range"
            },
        )
        .help("swap the bounds, or correct the one that is wrong");
        if let Some(minimum_at) = minimum_at {
            diagnostic = diagnostic.secondary(minimum_at, "the minimum");
        }
        self.diagnostics.push(diagnostic);
        false
    }
}

fn key_span<T>(field: &Option<Field<T>>) -> Option<Span> {
    field.as_ref().map(|f| f.span)
}

fn strip_optional(ty: &TypeText) -> &TypeText {
    match ty {
        TypeText::Optional(inner, _) => strip_optional(inner),
        other => other,
    }
}

fn literal_kind(literal: &Literal) -> &'static str {
    match literal {
        Literal::Str(_) => "string",
        Literal::Int(_) => "integer",
        Literal::Float(_) => "number",
        Literal::Bool(_) => "boolean",
    }
}

/// Integers and other numbers mix in one enum (as numbers); nothing else mixes.
fn same_kind(a: &str, b: &str) -> bool {
    let numeric = |k: &str| k == "integer" || k == "number";
    a == b || (numeric(a) && numeric(b))
}

fn article_word(kind: &str) -> &'static str {
    if kind == "integer" { "an" } else { "a" }
}

fn article(kind: &str) -> String {
    format!("{} {kind}", article_word(kind))
}

fn shown(literal: &Literal) -> String {
    format!("`{literal}`")
}

/// `value` as an `i64` when it is a whole number in range.
fn whole(value: f64) -> Option<i64> {
    // 2^63 is exactly representable; every whole f64 strictly inside ±2^63 fits an i64.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if value.fract() == 0.0 && value > -LIMIT && value < LIMIT {
        // Checked just above: whole and in range, so the cast is exact.
        #[allow(clippy::cast_possible_truncation)]
        Some(value as i64)
    } else {
        None
    }
}

fn not_whole(span: Span, value: f64, name: &str) -> Diagnostic {
    Diagnostic::new(
        Code::E0072,
        format!("a bound of an `{name}` field must be a whole number, not {value}"),
        span,
        "not a whole number",
    )
    .help("round the bound, or make the field a `number`")
}

fn not_finite(span: Span) -> Diagnostic {
    Diagnostic::new(
        Code::E0072,
        "a bound must be a finite number",
        span,
        "not finite",
    )
    .help("remove the bound to leave that side open")
}
