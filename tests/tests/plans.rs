//! Lowering: every example and valid corpus spec builds into a plan that follows the published
//! plan schema, the same plan every time; the examples' plans are snapshot-tested; and the
//! plan loader takes back what the compiler wrote and refuses what it did not.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)] // tests may index and unwrap what they built

use serde_json::Value;
use stratum_compiler::lower::{self, LowerError, Options};
use stratum_compiler::plan::{self, Action, Binding, LoadError, Plan, Target};
use stratum_tests::{check_one, specs_in};

fn plan_schema() -> Value {
    serde_json::from_str(include_str!("../../compiler/schemas/plan.schema.json"))
        .expect("the plan schema is JSON")
}

fn validator() -> jsonschema::Validator {
    jsonschema::draft202012::new(&plan_schema()).expect("the plan schema is a valid schema")
}

/// Builds a spec's text; `name` is the path the plan records.
fn build(name: &str, text: &str, options: &Options) -> Result<Plan, LowerError> {
    let (sources, compilation) = check_one(name, text.as_bytes());
    let src = sources.iter().next().expect("the spec was added");
    lower::lower(&compilation, src, options)
}

fn build_all(name: &str, text: &str) -> Plan {
    build(name, text, &Options::default()).unwrap_or_else(|error| panic!("{name}: {error}"))
}

fn assert_follows_schema(validator: &jsonschema::Validator, name: &str, json: &str) {
    let value: Value = serde_json::from_str(json).expect("a plan is JSON");
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|error| format!("{} at {}", error, error.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{name}: {errors:#?}");
}

#[test]
fn every_example_and_valid_spec_builds_a_plan_that_follows_the_schema() {
    let validator = validator();
    let mut built = 0;
    for dir in ["examples", "tests/corpus/valid"] {
        for (name, text) in specs_in(dir) {
            let plan = build_all(&name, &text);
            for pretty in [false, true] {
                assert_follows_schema(&validator, &name, &plan.to_json(pretty));
            }
            built += 1;
        }
    }
    assert!(built >= 15, "found only {built} specs");
}

#[test]
fn building_twice_gives_the_same_bytes() {
    for (name, text) in specs_in("examples") {
        let first = build_all(&name, &text).to_json(true);
        let second = build_all(&name, &text).to_json(true);
        assert_eq!(first, second, "{name}");
    }
}

#[test]
fn example_plans() {
    for (name, text) in specs_in("examples") {
        let plan = build_all(&name, &text);
        let snapshot = name
            .trim_start_matches("examples/")
            .trim_end_matches(".stratum.yaml")
            .to_owned();
        insta::assert_snapshot!(format!("plan_{snapshot}"), plan.to_json(true));
    }
}

#[test]
fn every_op_of_the_vm_follows_the_schema() {
    // Between them these use every instruction the compiler emits.
    let expressions = [
        "result.a.b > 1 and result.c < 2 or not result.d",
        "0 < result.n <= 10 < result.m",
        "result.x if result.y else -result.z + +result.w",
        "all(f.severity != 'high' for f in result.findings if f.ok)",
        "any(t.passed for t in result.tests)",
        "[x * 2 for x in result.items][0] == (1, 2)[1]",
        "len(result.s.strip().lower().split(',')) // 2 % 3 - 1 / 4",
        "result.name.startswith('a') and result.d.get('k') is not None",
        "result['k'] in ['a', 'b'] and 'x' not in result.tags",
        "min(result.a, 1) + max(result.b, 2) + int(str(bool(result.c)))",
        "file_exists('README.md') and file_contains('README.md', 'x')",
        "no_file_conflicts(result.tasks) and plan_completion(result.plan, result.files, 80)",
        "vocabulary_compliance('contracts/vocabulary.yaml', result.files, True, 'main')",
        "$.input.n + $.steps.s1.output.m > iteration",
        "(result.a, result.b)",
    ];
    let schema = plan_schema();
    let program_schema = serde_json::json!({
        "$ref": "#/$defs/program",
        "$defs": schema["$defs"],
    });
    let validator = jsonschema::draft202012::new(&program_schema).unwrap();
    let mut kinds = std::collections::BTreeSet::new();
    for text in expressions {
        let parsed = stratum_grammar::parse(text);
        let expr = parsed.expr.unwrap_or_else(|| panic!("{text} parses"));
        for folded in [true, false] {
            let program = if folded {
                stratum_grammar::compile(&expr, text)
            } else {
                stratum_grammar::compile::compile_unfolded(&expr, text)
            };
            let json = serde_json::to_value(&program).unwrap();
            for op in json["ops"].as_array().unwrap() {
                kinds.insert(match op {
                    Value::String(name) => name.clone(),
                    Value::Object(map) => map.keys().next().unwrap().clone(),
                    _ => panic!("an op is a name or an object"),
                });
            }
            let errors: Vec<String> = validator
                .iter_errors(&json)
                .map(|error| format!("{} at {}", error, error.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{text}: {errors:#?}");
        }
    }
    assert!(
        kinds.len() >= 30,
        "only {} kinds of op: {kinds:?}",
        kinds.len()
    );
}

const ROUTED: &str = r#"
version: "0.2"
contracts:
  Out: {ok: {type: boolean}, n: {type: integer}}
functions:
  work: {mode: infer, intent: "Work", input: {text: {type: string}}, output: Out, ensure: ["result.ok"]}
  approval: {mode: gate, timeout: 60}
flows:
  child:
    input: {text: {type: string}, prior: {type: Out}, count: {type: integer}}
    output: Out
    steps:
      - id: inner
        function: work
        inputs: {text: "$.input.text"}
  main:
    input: {text: {type: string}}
    output: Out
    steps:
      - id: first
        function: work
        inputs: {text: "$.input.text"}
        on_fail: fix
      - id: review
        function: approval
        depends_on: [first]
        on_approve: publish
        on_revise: first
        on_kill: ~
      - id: publish
        flow: child
        inputs: {prior: "$.steps.first.output", text: "$.input.text", count: 3}
        depends_on: [review]
        ensure: ["result.n > 0", "1 < 2"]
        next: fix
      - id: fix
        intent: "Fix it"
        depends_on: [publish]
        output_contract: Out
        inputs: {seen: "$.steps.first.output.ok", note: "plain text"}
        skip_if: "False"
        retries: 4
      - id: last
        intent: "Finish"
        depends_on: [fix]
        skip_if: "True"
        max_iterations: 3
        exit_criterion: "result.ok"
"#;

#[test]
fn routing_bindings_defaults_and_removed_constants() {
    let plan = build_all("routed.stratum.yaml", ROUTED);
    assert_eq!(plan.entry, None, "two flows and no workflow: no entry");
    let main = plan.flow("main").unwrap();
    let ids: Vec<&str> = main.steps.iter().map(|step| step.id.as_str()).collect();
    assert_eq!(ids, ["first", "review", "publish", "fix", "last"]);
    let [first, review, publish, fix, last] = &main.steps[..] else {
        panic!("five steps")
    };

    assert_eq!(first.next, Target::Step(1));
    assert_eq!(first.on_fail, Some(Target::Step(3)));
    assert_eq!(first.retries, 3, "a function's default");
    assert_eq!(first.ensure.len(), 1, "the function's ensure");
    match &review.action {
        Action::Gate {
            on_approve,
            on_revise,
            on_kill,
            timeout,
            ..
        } => {
            assert_eq!(
                (*on_approve, *on_revise, *on_kill, *timeout),
                (Target::Step(2), Target::Step(0), Target::Kill, Some(60))
            );
        }
        other => panic!("a gate, not {other:?}"),
    }
    assert_eq!(
        publish.action,
        Action::Flow {
            flow: plan.flows.iter().position(|f| f.name == "child").unwrap() as u32
        }
    );
    assert_eq!(publish.next, Target::Step(3), "`next: fix`");
    assert_eq!(
        publish.ensure.len(),
        1,
        "`1 < 2` always holds and is left out"
    );
    // A number, where the called flow declares an integer input.
    assert_eq!(publish.inputs[2].value, Binding::Const(3.into()));
    match &publish.inputs[0].value {
        Binding::Step { step: 0, path } => {
            assert!(plan.paths[*path as usize].is_empty(), "the whole output")
        }
        other => panic!("a step binding, not {other:?}"),
    }

    assert!(
        fix.skip.is_none(),
        "`skip_if: False` never skips and is left out"
    );
    assert_eq!(fix.retries, 4);
    assert_eq!(fix.inputs[1].value, Binding::Const("plain text".into()));
    match &fix.inputs[0].value {
        Binding::Step { step: 0, path } => assert_eq!(plan.paths[*path as usize], ["ok"]),
        other => panic!("a step binding, not {other:?}"),
    }

    assert!(last.skip.is_some(), "`skip_if: True` stays");
    assert_eq!(last.next, Target::End);
    assert_eq!(last.retries, 1, "an inline step's default");
    let iteration = last.iteration.as_ref().unwrap();
    assert_eq!(iteration.max_iterations, Some(3));
    assert!(iteration.exit_criterion.is_some());

    assert_eq!(
        main.levels,
        [vec![0], vec![1], vec![2], vec![3], vec![4]],
        "a chain"
    );
    assert_eq!(fix.depends_on, [0, 2]);
    assert_eq!(fix.level, 3);
    assert_eq!(main.start, Target::Step(0));

    // The source map points at the spec.
    let line = ROUTED
        .lines()
        .position(|l| l.contains("- id: fix"))
        .unwrap()
        + 1;
    assert_eq!(fix.source.line as usize, line);
    let contract = &plan.contracts[fix.output.contract.unwrap() as usize];
    assert_eq!(contract.name, "Out");
    assert_eq!(contract.hash.len(), 12);
}

#[test]
fn independent_steps_share_a_level() {
    let spec = r#"
version: "0.2"
flows:
  fan:
    input: {a: {type: string}}
    steps:
      - {id: left, intent: "Left", inputs: {a: "$.input.a"}}
      - {id: right, intent: "Right", inputs: {a: "$.input.a"}}
      - {id: join, intent: "Join", inputs: {l: "$.steps.left.output", r: "$.steps.right.output"}}
"#;
    let plan = build_all("fan.stratum.yaml", spec);
    assert_eq!(plan.entry, Some(0), "the only flow is the entry");
    assert_eq!(plan.flows[0].levels, [vec![0, 1], vec![2]]);
    assert_eq!(plan.flows[0].steps[2].depends_on, [0, 1]);
    assert_eq!(
        plan.paths,
        [vec!["a".to_owned()], vec![]],
        "paths are interned once"
    );
}

#[test]
fn flow_selects_a_flow_and_the_flows_it_runs() {
    let plan = build(
        "routed.stratum.yaml",
        ROUTED,
        &Options {
            flow: Some("main".to_owned()),
        },
    )
    .unwrap();
    let names: Vec<&str> = plan.flows.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["main", "child"], "the selected flow first");
    assert_eq!(plan.entry, Some(0));
    assert_eq!(plan.flows[0].steps[2].action, Action::Flow { flow: 1 });

    let child = build(
        "routed.stratum.yaml",
        ROUTED,
        &Options {
            flow: Some("child".to_owned()),
        },
    )
    .unwrap();
    assert_eq!(child.flows.len(), 1);

    let error = build(
        "routed.stratum.yaml",
        ROUTED,
        &Options {
            flow: Some("mian".to_owned()),
        },
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "no flow named `mian`; did you mean `main`?"
    );
}

#[test]
fn a_spec_with_errors_is_not_lowered() {
    let spec = "version: \"0.2\"\nflows:\n  f:\n    steps:\n      - {id: a, function: nope}\n";
    assert_eq!(
        build("bad.stratum.yaml", spec, &Options::default()).unwrap_err(),
        LowerError::SpecHasErrors
    );
}

#[test]
fn the_loader_takes_back_what_was_written() {
    for (name, text) in specs_in("examples") {
        let plan = build_all(&name, &text);
        for pretty in [false, true] {
            let loaded = plan::load(plan.to_json(pretty).as_bytes()).unwrap();
            assert_eq!(loaded, plan, "{name}");
        }
        assert!(plan.is_built_from(text.as_bytes()));
        assert!(!plan.is_built_from(format!("{text}\n").as_bytes()));
    }
}

/// Re-seals a plan edited as JSON, as a careless tool would.
fn edited(plan: &Plan, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut value = serde_json::to_value(plan).unwrap();
    edit(&mut value);
    let mut edited: Plan = serde_json::from_value(value).unwrap();
    edited.seal();
    edited.to_json(false).into_bytes()
}

#[test]
fn a_format_1_plan_still_loads() {
    // Format 2 added the version 0.3 actions only: the plans stored for flows that an older
    // runtime started keep running.
    let (name, text) = specs_in("examples")
        .into_iter()
        .find(|(name, _)| name.contains("deploy"))
        .unwrap();
    let mut plan = build_all(&name, &text);
    plan.format = 1;
    plan.seal();
    let loaded = plan::load(plan.to_json(false).as_bytes()).unwrap();
    assert_eq!(loaded, plan);
}

#[test]
fn the_loader_refuses_what_it_cannot_run() {
    let (name, text) = specs_in("examples")
        .into_iter()
        .find(|(name, _)| name.contains("deploy"))
        .unwrap();
    let plan = build_all(&name, &text);
    let json = plan.to_json(false);

    let not_json = plan::load(b"steps: [a, b]").unwrap_err();
    assert!(matches!(not_json, LoadError::NotAPlan { .. }), "{not_json}");
    let other_json = plan::load(br#"{"flows": []}"#).unwrap_err();
    assert_eq!(
        other_json.to_string(),
        "this is not a stratumc plan (it has no `format`); build one with `stratumc build SPEC -o PLAN`"
    );

    let future = json.replacen("\"format\":2", "\"format\":3", 1);
    let error = plan::load(future.as_bytes()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the plan has format 3 (written by stratumc 0.1.0), but this runtime reads format 2; \
         rebuild it from its spec with this version's `stratumc build`"
    );

    let truncated = &json.as_bytes()[..json.len() / 2];
    let error = plan::load(truncated).unwrap_err();
    assert!(matches!(error, LoadError::NotAPlan { .. }), "{error}");

    let missing = json.replacen("\"retries\":3,", "", 1);
    let error = plan::load(missing.as_bytes()).unwrap_err();
    assert!(
        matches!(&error, LoadError::Corrupted { reason, .. } if reason.contains("retries")),
        "{error}"
    );

    let tampered = json.replacen("\"retries\":3", "\"retries\":30", 1);
    assert_eq!(
        plan::load(tampered.as_bytes()).unwrap_err(),
        LoadError::ChecksumMismatch
    );

    let dangling = edited(&plan, |value| {
        value["flows"][1]["steps"][0]["next"] = serde_json::json!({"step": 99});
    });
    let error = plan::load(&dangling).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the plan is inconsistent: step `current` in flow `deploy` goes to step 99, but the flow \
         has 6; rebuild it from its spec with `stratumc build`"
    );
    let bad_path = edited(&plan, |value| {
        value["flows"][1]["steps"][0]["inputs"][0]["value"] =
            serde_json::json!({"input": {"path": 40}});
    });
    assert!(matches!(
        plan::load(&bad_path).unwrap_err(),
        LoadError::Inconsistent { .. }
    ));
}

#[test]
fn the_deepest_output_schema_a_spec_may_have_builds_and_loads() {
    // 122 levels of `items` is as deep as a spec may nest there (E0006 beyond).
    let mut schema = "{}".to_owned();
    for _ in 0..122 {
        schema = format!("{{\"items\": {schema}}}");
    }
    let spec = format!(
        "version: \"0.2\"\nflows:\n  f:\n    input: {{t: {{type: string}}}}\n    steps:\n      \
         - id: s\n        intent: \"Go deep\"\n        output_schema: {schema}\n"
    );
    let plan = build_all("deep.stratum.yaml", &spec);
    let loaded = plan::load(plan.to_json(false).as_bytes()).expect("a plan we wrote loads");
    assert_eq!(loaded, plan);
}

/// Every integer of a JSON value, by its path, so that one can be replaced.
fn integer_paths(value: &Value, path: &mut Vec<Value>, found: &mut Vec<Vec<Value>>) {
    match value {
        Value::Number(n) if n.is_u64() || n.is_i64() => found.push(path.clone()),
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                path.push(index.into());
                integer_paths(item, path, found);
                path.pop();
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                path.push(key.as_str().into());
                integer_paths(item, path, found);
                path.pop();
            }
        }
        _ => {}
    }
}

fn at<'a>(value: &'a mut Value, path: &[Value]) -> &'a mut Value {
    path.iter().fold(value, |value, step| match step {
        Value::String(key) => &mut value[key.as_str()],
        Value::Number(index) => &mut value[index.as_u64().unwrap() as usize],
        _ => unreachable!(),
    })
}

/// Runs every expression of a plan the loader accepted, as the runtime would.
fn run_every_expression(plan: &Plan) {
    let result =
        serde_json::json!({"all_passed": true, "passed": 3, "failed": 0, "url": "https://x"});
    let input = serde_json::json!({"project": "p"});
    let bindings = stratum_grammar::Bindings::new()
        .name("result", &result)
        .input(&input)
        .step("release", &result);
    let limits = stratum_grammar::Limits {
        instructions: 10_000,
        ..stratum_grammar::Limits::default()
    };
    for flow in &plan.flows {
        for step in &flow.steps {
            let skip = step.skip.as_ref().map(|skip| &skip.condition);
            for expression in step.ensure.iter().chain(skip) {
                let _ = expression.program.evaluate(&bindings, &limits);
                let _ = expression.program.explain(&bindings, &limits).to_string();
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..Default::default()
    })]

    /// A plan whose numbers were changed and then sealed again, as a buggy or hostile tool
    /// might write it, is refused or runs without a panic: operand indices, jump offsets, step
    /// and path indices all included.
    #[test]
    fn a_plan_with_any_number_changed_is_refused_or_runs(
        choices in proptest::collection::vec((0usize..10_000, proptest::prelude::any::<i64>()), 1..4),
    ) {
        let (name, text) = specs_in("examples")
            .into_iter()
            .find(|(name, _)| name.contains("deploy"))
            .unwrap();
        let plan = build_all(&name, &text);
        let mut value = serde_json::to_value(&plan).unwrap();
        let mut found = Vec::new();
        integer_paths(&value, &mut Vec::new(), &mut found);
        for (pick, number) in &choices {
            let path = &found[pick % found.len()];
            // Small numbers are the interesting ones: near the real indices and offsets.
            *at(&mut value, path) = (number % 64).into();
        }
        let Ok(mut mutated) = serde_json::from_value::<Plan>(value) else {
            return Ok(());
        };
        mutated.seal();
        if let Ok(loaded) = plan::load(mutated.to_json(false).as_bytes()) {
            run_every_expression(&loaded);
        }
    }
}
