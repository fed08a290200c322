//! `examples/embed_agent.rs` runs as a test, so the example cannot rot: it checks its own
//! result (the edit is made, then undone byte for byte) and fails with an error otherwise.

#[path = "../examples/embed_agent.rs"]
mod embed_agent;

#[test]
fn the_embedding_example_runs_a_turn_and_undoes_it() {
    embed_agent::main().unwrap();
}
