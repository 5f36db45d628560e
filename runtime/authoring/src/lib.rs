//! `stratum-authoring`: the tools that write specs rather than run them: the spec-kit compiler
//! ([`speckit`]: a `tasks.md` directory → a spec), the workflows listing ([`workflows`]: the
//! specs under a directory, each checked), pipeline drafts ([`draft`]: a phase list saved for
//! the agent to refine), and [`confined`], reading a file without leaving a root, which they and
//! `stratum-mcp`'s set-up share. Pure functions of files; no store, no server.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]

pub mod confined;
pub mod draft;
pub mod speckit;
pub mod workflows;
