// TEMPORARY until the scalar map lands.
use std::ops::Range;
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarStyle { Plain, SingleQuoted, DoubleQuoted, Literal, Folded }
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalarMap { start: usize, end: usize }
impl ScalarMap {
    pub fn new(_src: &str, token: Range<usize>, _style: ScalarStyle, _value: &str) -> ScalarMap { ScalarMap { start: token.start, end: token.end } }
    pub fn source_range(&self, _decoded: Range<usize>) -> Range<usize> { self.start..self.end }
    pub fn is_exact(&self) -> bool { false }
}
