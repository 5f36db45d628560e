//! Prints the generated benchmark spec with the given number of steps, for measuring the
//! `stratumc` binary itself (peak memory, `hyperfine`): `generate-spec 10000 > big.stratum.yaml`.

fn main() {
    let steps = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(1_000);
    print!("{}", stratum_tests::generated_spec(steps));
}
