//! Any bytes through the whole front end and every renderer: no panic, no hang, spans inside
//! the file. Run with `cargo fuzz run front_end` from this directory (nightly toolchain).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stratum_compiler::render::{self, human};
use stratum_compiler::source::SourceMap;

fuzz_target!(|bytes: &[u8]| {
    let mut sources = SourceMap::new();
    let compilation = stratum_compiler::check_bytes(&mut sources, "fuzz.stratum.yaml", bytes);
    let Some(file) = sources.get(compilation.file) else { return };
    for diagnostic in &compilation.diagnostics {
        assert!(diagnostic.primary.span.end as usize <= file.text().len());
    }
    let compilations = [compilation];
    let reports = render::reports(&sources, &compilations);
    let _ = human::render(&sources, &reports, human::Style::PLAIN);
    let _ = render::json::render(&sources, &reports);
    let _ = render::sarif::render(&sources, &reports);
});
