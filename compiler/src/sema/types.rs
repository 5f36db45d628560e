//! Contract fields as types: of the expression language, and as JSON Schemas with content
//! hashes.
//!
//! Takes the AST's contracts and the `input` fields of functions and flows; gives every field a
//! [`FieldType`] (the grammar's [`Type`] plus what it cannot hold: numeric ranges and string
//! lengths), every contract a closed record [`Type`], a JSON Schema (draft 2020-12, see
//! [`json_schema`](super::json_schema)) and a content hash, and reports E0070 and E0072–E0075.
//! Field resolution itself lives in [`fields`](super::fields), and the field types, re-exported
//! here, in [`field_type`](super::field_type).
//!
//! Invariants: every field gets a type; a field whose type could not be resolved is `any`
//! after exactly one diagnostic, so nothing that reads it reports again. A contract that
//! contains itself is reported once per group of mutually recursive contracts and the fields
//! that close the cycle are typed `any`, so the rest is a DAG and every schema is finite. Work is
//! bounded: contracts are resolved in a topological order computed without recursion, and a
//! contract whose schema would pass [`MAX_SCHEMA_NODES`] values or [`MAX_SCHEMA_DEPTH`] levels
//! (nested contracts are inlined, so sizes multiply) gets no schema and the type `any`.

use std::collections::{HashMap, HashSet, VecDeque};

use petgraph::graph::{DiGraph, NodeIndex};
use serde_json::Value;
use stratum_grammar::types::{Record, RecordField, Type};

use crate::diagnostic::{Code, Diagnostic};
use crate::sema::fields::{Resolver, Use};
use crate::sema::json_schema;
use crate::sema::symbols::Symbols;
use crate::source::Span;
use crate::syntax::ast::{Ast, FieldDef};

pub use crate::sema::field_type::{Bounds, ContractField, FieldType, Literal};

/// Most JSON values in one contract's schema (nested contracts inlined).
pub const MAX_SCHEMA_NODES: usize = 10_000;
/// Most JSON values in the schemas of all contracts of a spec, and separately in the record
/// types of all `input` fields together.
pub const MAX_TOTAL_NODES: usize = 1_000_000;
/// Deepest nesting of one contract's schema.
pub const MAX_SCHEMA_DEPTH: usize = 128;

/// The type of every contract, by name, with its schema and hash.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContractTypes {
    contracts: HashMap<String, Type>,
    fields: HashMap<String, Vec<ContractField>>,
    schemas: HashMap<String, Value>,
    hashes: HashMap<String, String>,
    uses: Vec<(String, Span)>,
    /// Size in schema values and depth of each contract that has a schema.
    sizes: HashMap<String, (usize, usize)>,
    /// `input` fields past [`MAX_TOTAL_NODES`], by the span of their definition: typed `any`.
    oversized_inputs: HashSet<Span>,
}

impl ContractTypes {
    pub fn build(ast: &Ast, symbols: &Symbols, diagnostics: &mut Vec<Diagnostic>) -> ContractTypes {
        let names: Vec<&str> = symbols.contracts.names().collect();
        let mut types = ContractTypes::default();
        let mut resolver = Resolver::new(&names, diagnostics);

        // Every field of every contract, with the contract references it makes.
        let mut resolved: Vec<Vec<(ContractField, Vec<Use>)>> = Vec::new();
        for contract in &ast.contracts {
            let fields = contract
                .fields
                .iter()
                .map(|def| {
                    let (ty, uses) = resolver.field(def);
                    let field = ContractField {
                        name: def.name.value.clone(),
                        ty,
                    };
                    (field, uses)
                })
                .collect();
            resolved.push(fields);
        }
        let mut input_fields: Vec<(&FieldDef, FieldType)> = Vec::new();
        let inputs = ast
            .functions
            .iter()
            .filter_map(|function| function.input.as_ref())
            .chain(ast.flows.iter().filter_map(|flow| flow.input.as_ref()));
        for input in inputs {
            for def in &input.value {
                let (ty, uses) = resolver.field(def);
                types
                    .uses
                    .extend(uses.into_iter().map(|u| (u.name, u.span)));
                input_fields.push((def, ty));
            }
        }
        drop(resolver);
        for fields in &resolved {
            for (_, uses) in fields {
                types
                    .uses
                    .extend(uses.iter().map(|u| (u.name.clone(), u.span)));
            }
        }
        types.uses.sort_by_key(|(_, span)| *span);

        break_cycles(ast, &mut resolved, diagnostics);
        let fields: Vec<Vec<ContractField>> = resolved
            .into_iter()
            .map(|fields| fields.into_iter().map(|(field, _)| field).collect())
            .collect();
        let order = topological_order(ast, &fields);

        let mut total = 0usize;
        let mut total_reported = false;
        for index in order {
            let (Some(contract), Some(contract_fields)) =
                (ast.contracts.get(index), fields.get(index))
            else {
                continue;
            };
            let name = contract.name.value.clone();
            let measured = types.measure(contract_fields);
            let within = match measured {
                Measured::Fits(size, depth) => {
                    total = total.saturating_add(size);
                    if total > MAX_TOTAL_NODES {
                        if !total_reported {
                            total_reported = true;
                            diagnostics.push(too_large_in_total(contract.name.span, &name));
                        }
                        None
                    } else {
                        Some((size, depth))
                    }
                }
                Measured::TooLarge(size, depth) => {
                    diagnostics.push(too_large(contract.name.span, &name, size, depth));
                    None
                }
                // A nested contract is already reported.
                Measured::Unknown => None,
            };
            match within {
                Some(size) => {
                    let ty = Type::record(Record {
                        fields: contract_fields
                            .iter()
                            .map(|field| RecordField {
                                name: field.name.clone(),
                                ty: field.ty.to_type(&types.contracts),
                            })
                            .collect(),
                        open: false,
                    });
                    let schema = json_schema::contract(contract_fields, &types.schemas);
                    debug_assert_eq!(
                        json_schema::count_values(&schema),
                        size.0,
                        "`measure` predicts the size of the schema of `{name}`"
                    );
                    let hash = json_schema::hash(&schema);
                    types.contracts.insert(name.clone(), ty);
                    types.schemas.insert(name.clone(), schema);
                    types.hashes.insert(name.clone(), hash);
                    types.sizes.insert(name.clone(), size);
                }
                None => {
                    types.contracts.insert(name.clone(), Type::Any);
                }
            }
            types.fields.insert(name, contract_fields.clone());
        }

        // Input records clone the types of the contracts they name: bound their total too.
        let mut total = 0usize;
        let mut total_reported = false;
        for (def, ty) in &input_fields {
            let size = ty
                .contracts()
                .iter()
                .map(|name| types.sizes.get(*name).map_or(1, |(size, _)| *size))
                .fold(1usize, usize::saturating_add);
            total = total.saturating_add(size);
            if total > MAX_TOTAL_NODES {
                types.oversized_inputs.insert(def.span);
                if !total_reported {
                    total_reported = true;
                    diagnostics.push(inputs_too_large(def.name.span, &def.name.value));
                }
            }
        }
        types
    }

    /// The record type of the contract named `name`; `None` when no contract has that name.
    pub fn contract(&self, name: &str) -> Option<&Type> {
        self.contracts.get(name)
    }

    /// The record type of a function's or flow's `input` fields. Diagnostics about them were
    /// given by [`ContractTypes::build`]; here every problem is silently `any`.
    pub fn record(&self, fields: &[FieldDef]) -> Type {
        let names: Vec<&str> = self.contracts.keys().map(String::as_str).collect();
        let mut ignored = Vec::new();
        let mut resolver = Resolver::new(&names, &mut ignored);
        Type::record(Record {
            fields: fields
                .iter()
                .map(|def| RecordField {
                    name: def.name.value.clone(),
                    ty: if self.oversized_inputs.contains(&def.span) {
                        Type::Any
                    } else {
                        resolver.field(def).0.to_type(&self.contracts)
                    },
                })
                .collect(),
            open: false,
        })
    }

    /// The JSON Schema of a function's or flow's `input` fields: an object, as a contract's. A
    /// field whose type does not resolve, or is past the size bound, is `{}` (it was reported).
    pub fn input_schema(&self, fields: &[FieldDef]) -> Value {
        let names: Vec<&str> = self.contracts.keys().map(String::as_str).collect();
        let mut ignored = Vec::new();
        let mut resolver = Resolver::new(&names, &mut ignored);
        let resolved: Vec<ContractField> = fields
            .iter()
            .map(|def| ContractField {
                name: def.name.value.clone(),
                ty: if self.oversized_inputs.contains(&def.span) {
                    FieldType::Any
                } else {
                    resolver.field(def).0
                },
            })
            .collect();
        json_schema::contract(&resolved, &self.schemas)
    }

    /// The resolved fields of the contract named `name`, with their ranges, in declaration
    /// order.
    pub fn fields(&self, name: &str) -> Option<&[ContractField]> {
        self.fields.get(name).map(Vec::as_slice)
    }

    /// The JSON Schema (draft 2020-12) of the contract named `name`; `None` when there is no
    /// such contract or its schema could not be built (an error was reported).
    pub fn schema(&self, name: &str) -> Option<&Value> {
        self.schemas.get(name)
    }

    /// The content hash of the contract named `name`: the first 12 hex digits of the SHA-256
    /// of its canonical schema.
    pub fn hash(&self, name: &str) -> Option<&str> {
        self.hashes.get(name).map(String::as_str)
    }

    /// Every reference to a contract from a field type (of contracts and of `input` fields,
    /// `items` included), with the span of the name, in source order. Names that are not
    /// contracts are not listed (they are E0070).
    pub fn uses(&self) -> impl Iterator<Item = (&str, Span)> {
        self.uses.iter().map(|(name, span)| (name.as_str(), *span))
    }

    /// The size and depth of a contract's schema, from its fields and the sizes of the
    /// contracts it nests, without building it.
    fn measure(&self, fields: &[ContractField]) -> Measured {
        // {"type":"object","properties":{…},"required":[…]}: 4 values around the fields, and
        // a name in `required` for each field that is not optional. Keys are not values.
        let mut size = 4usize;
        let mut depth = 1usize;
        for field in fields {
            let Some((field_size, field_depth)) = self.measure_type(&field.ty) else {
                return Measured::Unknown;
            };
            size = size
                .saturating_add(field_size)
                .saturating_add(usize::from(!field.ty.is_optional()));
            depth = depth.max(field_depth.saturating_add(2));
        }
        if size > MAX_SCHEMA_NODES || depth > MAX_SCHEMA_DEPTH {
            Measured::TooLarge(size, depth)
        } else {
            Measured::Fits(size, depth)
        }
    }

    fn measure_type(&self, ty: &FieldType) -> Option<(usize, usize)> {
        Some(match ty {
            FieldType::Any => (1, 1),
            FieldType::String(bounds) => (2 + bound_count(bounds), 1),
            FieldType::Number(bounds) => (2 + bound_count(bounds), 1),
            FieldType::Integer(bounds) => (2 + bound_count(bounds), 1),
            FieldType::Boolean | FieldType::Object => (2, 1),
            FieldType::Enum(values) => (values.len().saturating_add(2), 2),
            FieldType::Array(None) => (2, 1),
            FieldType::Array(Some(item)) => {
                let (size, depth) = self.measure_type(item)?;
                (size.saturating_add(2), depth.saturating_add(1))
            }
            FieldType::Optional(inner) => {
                let (size, depth) = self.measure_type(inner)?;
                (size.saturating_add(4), depth.saturating_add(2))
            }
            FieldType::Contract(name) => *self.sizes.get(name)?,
        })
    }
}

fn bound_count<T>(bounds: &Bounds<T>) -> usize {
    usize::from(bounds.minimum.is_some()) + usize::from(bounds.maximum.is_some())
}

enum Measured {
    Fits(usize, usize),
    TooLarge(usize, usize),
    /// A nested contract has no schema.
    Unknown,
}

/// Finds the groups of mutually recursive contracts, reports one cycle of each, and types the
/// fields that reference a contract of their own group as `any`.
fn break_cycles(
    ast: &Ast,
    resolved: &mut [Vec<(ContractField, Vec<Use>)>],
    diagnostics: &mut Vec<Diagnostic>,
) {
    let index = contract_indices(ast);
    // Edges: (from, to, span of the reference, field name).
    let mut graph: DiGraph<usize, (Span, String)> = DiGraph::new();
    let nodes: Vec<NodeIndex> = (0..ast.contracts.len())
        .map(|i| graph.add_node(i))
        .collect();
    for (from, fields) in resolved.iter().enumerate() {
        for (field, uses) in fields {
            for use_ in uses {
                let to = index.get(use_.name.as_str()).and_then(|&to| nodes.get(to));
                if let (Some(&a), Some(&b)) = (nodes.get(from), to) {
                    graph.add_edge(a, b, (use_.span, field.name.clone()));
                }
            }
        }
    }
    // Kosaraju's algorithm walks with an explicit stack (petgraph's Tarjan recurses).
    for component in petgraph::algo::kosaraju_scc(&graph) {
        let cyclic = component.len() > 1
            || component
                .first()
                .is_some_and(|&node| graph.find_edge(node, node).is_some());
        if !cyclic {
            continue;
        }
        let members: HashSet<NodeIndex> = component.iter().copied().collect();
        let Some(&start) = component.iter().min_by_key(|node| graph[**node]) else {
            continue;
        };
        if let Some(diagnostic) = recursive_contract(ast, &graph, &members, start) {
            diagnostics.push(diagnostic);
        }
        let names: HashSet<&str> = component
            .iter()
            .filter_map(|node| ast.contracts.get(graph[*node]))
            .map(|contract| contract.name.value.as_str())
            .collect();
        for node in &component {
            if let Some(fields) = resolved.get_mut(graph[*node]) {
                for (field, _) in fields.iter_mut() {
                    field.ty.forget_contracts(&names);
                }
            }
        }
    }
}

/// E0073 `recursive-contract`: the shortest cycle from `start` back to itself, every edge
/// labelled at the field type that makes it.
fn recursive_contract(
    ast: &Ast,
    graph: &DiGraph<usize, (Span, String)>,
    members: &HashSet<NodeIndex>,
    start: NodeIndex,
) -> Option<Diagnostic> {
    use petgraph::visit::EdgeRef;
    // Breadth-first from `start`, remembering the edge that reached each contract.
    let mut reached: HashMap<NodeIndex, petgraph::graph::EdgeIndex> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    let mut closing = None;
    'search: while let Some(node) = queue.pop_front() {
        let mut edges: Vec<_> = graph.edges(node).collect();
        edges.sort_by_key(|edge| edge.weight().0);
        for edge in edges {
            let target = edge.target();
            if target == start {
                closing = Some(edge.id());
                break 'search;
            }
            if members.contains(&target) && !reached.contains_key(&target) {
                reached.insert(target, edge.id());
                queue.push_back(target);
            }
        }
    }
    let mut path = vec![closing?];
    loop {
        let (from, _) = graph.edge_endpoints(*path.last()?)?;
        if from == start {
            break;
        }
        path.push(*reached.get(&from)?);
    }
    path.reverse();
    let name = |node: NodeIndex| {
        ast.contracts
            .get(graph[node])
            .map_or("?", |contract| contract.name.value.as_str())
    };
    let mut chain = vec![format!("`{}`", name(start))];
    let mut labels = Vec::new();
    for edge in &path {
        let (from, to) = graph.edge_endpoints(*edge)?;
        let (span, field) = &graph[*edge];
        chain.push(format!("`{}`", name(to)));
        labels.push((
            *span,
            format!("`{}.{field}` is a `{}`", name(from), name(to)),
        ));
    }
    let mut labels = labels.into_iter();
    let (span, label) = labels.next()?;
    let mut diagnostic = Diagnostic::new(
        Code::E0073,
        format!(
            "contract `{}` contains itself: {}",
            name(start),
            chain.join(" → ")
        ),
        span,
        label,
    )
    .help(
        "a contract's schema inlines the contracts it nests, so it cannot contain itself; \
         type one of these fields `object` (or an id string) to break the cycle",
    );
    for (span, label) in labels {
        diagnostic = diagnostic.secondary(span, label);
    }
    Some(diagnostic)
}

/// Each contract's index in `Ast::contracts`, by name.
fn contract_indices(ast: &Ast) -> HashMap<&str, usize> {
    ast.contracts
        .iter()
        .enumerate()
        .map(|(i, contract)| (contract.name.value.as_str(), i))
        .collect()
}

/// Indices of the contracts, each after the contracts it nests (which the caller has made
/// acyclic); ties in declaration order. Kahn's algorithm, without recursion.
fn topological_order(ast: &Ast, fields: &[Vec<ContractField>]) -> Vec<usize> {
    let index = contract_indices(ast);
    let mut waiting_on = vec![0usize; fields.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); fields.len()];
    for (from, contract_fields) in fields.iter().enumerate() {
        for field in contract_fields {
            for name in field.ty.contracts() {
                let Some(&to) = index.get(name) else {
                    continue;
                };
                if let (Some(count), Some(list)) =
                    (waiting_on.get_mut(from), dependents.get_mut(to))
                {
                    *count += 1;
                    list.push(from);
                }
            }
        }
    }
    let mut ready: std::collections::BTreeSet<usize> = waiting_on
        .iter()
        .enumerate()
        .filter(|(_, count)| **count == 0)
        .map(|(i, _)| i)
        .collect();
    let mut order = Vec::with_capacity(fields.len());
    while let Some(next) = ready.pop_first() {
        order.push(next);
        for &dependent in dependents.get(next).map_or(&[][..], Vec::as_slice) {
            if let Some(count) = waiting_on.get_mut(dependent) {
                *count -= 1;
                if *count == 0 {
                    ready.insert(dependent);
                }
            }
        }
    }
    order
}

/// E0075 `contract-too-large`: the schema, with nested contracts inlined, passes a limit.
fn too_large(span: Span, name: &str, size: usize, depth: usize) -> Diagnostic {
    let (message, label) = if depth > MAX_SCHEMA_DEPTH {
        (
            format!("the schema of contract `{name}` nests deeper than {MAX_SCHEMA_DEPTH} levels"),
            "nests too deep",
        )
    } else {
        (
            format!(
                "the schema of contract `{name}` would hold {size} values, more than the \
                 {MAX_SCHEMA_NODES} accepted"
            ),
            "schema too large",
        )
    };
    Diagnostic::new(Code::E0075, message, span, label).help(
        "nested contracts are copied into the schema of every contract that uses them; \
         type some of the nested fields `object` or flatten the contract",
    )
}

fn too_large_in_total(span: Span, name: &str) -> Diagnostic {
    Diagnostic::new(
        Code::E0075,
        format!(
            "the schemas of the contracts up to `{name}` together hold more than \
             {MAX_TOTAL_NODES} values"
        ),
        span,
        "over the total schema budget",
    )
    .help("nest fewer or smaller contracts; this and later contracts get no schema")
}

fn inputs_too_large(span: Span, name: &str) -> Diagnostic {
    Diagnostic::new(
        Code::E0075,
        format!(
            "the `input` fields up to `{name}` nest contracts that together hold more than \
             {MAX_TOTAL_NODES} values"
        ),
        span,
        "over the total budget",
    )
    .help("nest fewer or smaller contracts in `input` fields; this and later ones are typed `any`")
}
