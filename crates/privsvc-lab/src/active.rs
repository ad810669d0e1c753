//! The active phases: after the simulated day, each active party attacks victims of its own.

use rand::rngs::StdRng;

use crate::attacks::ActiveOutcomes;
use crate::population::World;

/// Runs the active phases the scenario switches on and scores them.
pub async fn run_phases(_world: &World, _rng: &mut StdRng) -> ActiveOutcomes {
    ActiveOutcomes::default()
}
