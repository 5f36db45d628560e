//! Prints the generated benchmark spec with the given number of steps, for measuring the
//! `stratumc` binary itself (peak memory, `hyperfine`): `generate-spec 10000 > big.stratum.yaml`;
//! `generate-spec 10000 --warnings` gives the spec with a warning in every step.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let steps = args
        .iter()
        .find_map(|arg| arg.parse().ok())
        .unwrap_or(1_000);
    if args.iter().any(|arg| arg == "--warnings") {
        print!("{}", stratum_tests::generated_spec_with_warnings(steps));
    } else {
        print!("{}", stratum_tests::generated_spec(steps));
    }
}
