//! A first end-to-end run: the sentiment example through retries to completion.

use stratum_test_support as support;

use serde_json::json;
use support::Scenario;

const SENTIMENT: &str = include_str!("../../../examples/sentiment.stratum.yaml");

#[test]
fn sentiment_retries_then_completes() {
    let mut s = Scenario::new(SENTIMENT);
    s.start(Some("run"), json!({"text": "I love it"}));
    let flow = s.flow(1);
    s.done(&flow, "s1", json!({"label": "positive", "confidence": 0.5}));
    s.done(
        &flow,
        "s1",
        json!({"label": "positive", "confidence": 0.95}),
    );
    s.audit(&flow);
    insta::assert_snapshot!(s.transcript());
}
