//! Integration tests of the trace crate: the reader never panics, the published data reads,
//! and replays on the shipped trace behave as the FGD paper's experiment does.

mod experiment;
mod reader_props;
mod replays;
mod timed;
