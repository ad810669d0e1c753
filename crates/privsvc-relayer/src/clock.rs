//! The relayer's clocks (docs/RELIABILITY.md, "Clocks that step").
//!
//! Two readings, never mixed:
//! - the timeline ([`Timeline::now_ms`]): monotonic milliseconds for every wait, deadline and
//!   retry of the relayer (batch windows, holds, status retention, rate-limit windows). It never
//!   steps when the wall clock does. It continues across restarts: an anchor (a timeline reading
//!   and the wall time at that moment, [`Anchor`]) is stored every [`ANCHOR_EVERY`], and the next
//!   start resumes the timeline at the anchor plus the wall time elapsed since it (nothing when
//!   the wall clock went back meanwhile). A database without an anchor starts the timeline at the
//!   wall time, so the times a database stored before anchors existed keep their meaning.
//! - the wall clock ([`Timeline::wall_ms`]): only where the protocol names wall time: the
//!   envelope's hour window, token epochs, and times shown to users (`lastBeat`).
//!
//! [`Clock`] is the source of both, a value handed to the relayer in its configuration (never a
//! global): the system's clocks in a deployment, and in tests the same with a wall clock that
//! the test steps ([`Clock::step_wall`]) as an NTP correction or a VM restore would.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the timeline's anchor is stored: a wall-clock step within this time before a
/// crash is the only step a restart can mistake for elapsed time.
pub const ANCHOR_EVERY: Duration = Duration::from_secs(10);

/// A difference between the wall clock's and the timeline's progress above this is logged as
/// a step of the wall clock.
const STEP_REPORTED: u64 = 2_000;

/// The sources of time: a monotonic clock and the wall clock. Cheap to clone; clones share the
/// test offsets.
#[derive(Clone)]
pub struct Clock {
    inner: Arc<ClockInner>,
}

struct ClockInner {
    origin: Instant,
    /// Added to the system's wall clock ([`Clock::step_wall`]).
    wall_step_ms: AtomicI64,
    /// Added to both clocks ([`Clock::advance`]).
    advanced_ms: AtomicU64,
}

impl Clock {
    /// The system's clocks: `std::time::Instant` (monotonic) and `SystemTime` (wall).
    pub fn system() -> Clock {
        Clock {
            inner: Arc::new(ClockInner {
                origin: Instant::now(),
                wall_step_ms: AtomicI64::new(0),
                advanced_ms: AtomicU64::new(0),
            }),
        }
    }

    /// Monotonic milliseconds since this clock was made.
    pub fn elapsed_ms(&self) -> u64 {
        let real = u64::try_from(self.inner.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        real.saturating_add(self.inner.advanced_ms.load(Ordering::SeqCst))
    }

    /// The wall clock, Unix epoch milliseconds.
    pub fn wall_ms(&self) -> u64 {
        let system = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let stepped = system.saturating_add(self.inner.advanced_ms.load(Ordering::SeqCst));
        let step = self.inner.wall_step_ms.load(Ordering::SeqCst);
        if step >= 0 {
            stepped.saturating_add(step.unsigned_abs())
        } else {
            stepped.saturating_sub(step.unsigned_abs())
        }
    }

    /// Steps the wall clock by `by_ms` (negative: back), as an NTP correction or a VM restore
    /// does; the monotonic clock does not move. For tests.
    pub fn step_wall(&self, by_ms: i64) {
        self.inner.wall_step_ms.fetch_add(by_ms, Ordering::SeqCst);
    }

    /// Moves both clocks forward by `ms` at once, as if that much time had passed. For tests of
    /// code that reads the clock without waiting on a timer.
    pub fn advance(&self, ms: u64) {
        self.inner.advanced_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Default for Clock {
    /// [`Clock::system`].
    fn default() -> Clock {
        Clock::system()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clock")
            .field(
                "wall_step_ms",
                &self.inner.wall_step_ms.load(Ordering::SeqCst),
            )
            .field(
                "advanced_ms",
                &self.inner.advanced_ms.load(Ordering::SeqCst),
            )
            .finish_non_exhaustive()
    }
}

/// A timeline reading and the wall time at the same moment, stored so that the next start can
/// resume the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    /// The timeline, ms.
    pub timeline_ms: u64,
    /// The wall clock at that moment, Unix epoch ms.
    pub wall_ms: u64,
}

impl Anchor {
    /// The stored form: `"<timeline_ms> <wall_ms>"`.
    pub fn encode(&self) -> String {
        format!("{} {}", self.timeline_ms, self.wall_ms)
    }

    /// Parses [`Anchor::encode`]'s form; `None` when it does not parse.
    pub fn decode(text: &str) -> Option<Anchor> {
        let (timeline, wall) = text.trim().split_once(' ')?;
        Some(Anchor {
            timeline_ms: timeline.parse().ok()?,
            wall_ms: wall.parse().ok()?,
        })
    }
}

/// The relayer's time: its monotonic timeline and the wall clock (see the module docs).
#[derive(Debug, Clone)]
pub struct Timeline {
    clock: Clock,
    /// The timeline at the clock's origin.
    base_ms: u64,
}

impl Timeline {
    /// Starts the timeline on `clock`, resuming after `anchor` (the last one stored by an
    /// earlier run): at the anchor's timeline plus the wall time elapsed since the anchor, or
    /// exactly at the anchor when the wall clock is now behind it. Without an anchor the
    /// timeline starts at the wall time.
    pub fn start(clock: Clock, anchor: Option<Anchor>) -> Timeline {
        let wall = clock.wall_ms();
        let now = match anchor {
            Some(a) => a.timeline_ms.saturating_add(wall.saturating_sub(a.wall_ms)),
            None => wall,
        };
        let base_ms = now.saturating_sub(clock.elapsed_ms());
        Timeline { clock, base_ms }
    }

    /// The timeline now, ms: monotonic, for every wait, deadline and retry.
    pub fn now_ms(&self) -> u64 {
        self.base_ms.saturating_add(self.clock.elapsed_ms())
    }

    /// The wall clock now, Unix epoch ms: only for the protocol's wall times.
    pub fn wall_ms(&self) -> u64 {
        self.clock.wall_ms()
    }

    /// The anchor to store now.
    pub fn anchor(&self) -> Anchor {
        Anchor {
            timeline_ms: self.now_ms(),
            wall_ms: self.wall_ms(),
        }
    }

    /// How far the wall clock stepped between anchor `earlier` and now, relative to the
    /// timeline (positive: forward), when that is more than a couple of seconds.
    pub fn step_since(&self, earlier: Anchor) -> Option<i64> {
        let now = self.anchor();
        let timeline = now.timeline_ms.saturating_sub(earlier.timeline_ms) as i128;
        let wall = now.wall_ms as i128 - earlier.wall_ms as i128;
        let step = wall - timeline;
        (step.unsigned_abs() > u128::from(STEP_REPORTED))
            .then(|| i64::try_from(step).unwrap_or(if step > 0 { i64::MAX } else { i64::MIN }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3_600_000;

    #[test]
    fn a_step_of_the_wall_clock_moves_the_wall_reading_only() {
        let clock = Clock::system();
        let time = Timeline::start(clock.clone(), None);
        let (t0, w0) = (time.now_ms(), time.wall_ms());
        assert!(
            t0.abs_diff(w0) < 1_000,
            "a fresh timeline starts at the wall time"
        );
        clock.step_wall(-2 * HOUR as i64);
        assert!(time.now_ms() >= t0 && time.now_ms() - t0 < 1_000);
        assert!(w0 - time.wall_ms() > 2 * HOUR - 1_000);
        clock.step_wall(4 * HOUR as i64);
        assert!(time.now_ms() - t0 < 1_000);
        assert!(time.wall_ms() - w0 > 2 * HOUR - 1_000);
        clock.advance(5_000);
        assert!(time.now_ms() - t0 >= 5_000);
    }

    #[test]
    fn a_restart_resumes_the_timeline_after_its_anchor() {
        let clock = Clock::system();
        let wall = clock.wall_ms();
        // Stored 10 minutes ago by a run whose timeline ran 2 hours behind the wall clock
        // (its wall clock stepped forward 2 hours while it ran).
        let anchor = Anchor {
            timeline_ms: wall - 2 * HOUR - 600_000,
            wall_ms: wall - 600_000,
        };
        let time = Timeline::start(clock.clone(), Some(anchor));
        let now = time.now_ms();
        assert!(
            now.abs_diff(wall - 2 * HOUR) < 1_000,
            "resumed 10 minutes after the anchor"
        );
        // The wall clock went back while the relayer was down: no time counts as elapsed.
        let anchor = Anchor {
            timeline_ms: 1_000_000,
            wall_ms: wall + HOUR,
        };
        let time = Timeline::start(clock, Some(anchor));
        assert!(time.now_ms().abs_diff(1_000_000) < 1_000);
    }

    #[test]
    fn anchors_round_trip_and_steps_are_reported() {
        let a = Anchor {
            timeline_ms: 12,
            wall_ms: 34,
        };
        assert_eq!(Anchor::decode(&a.encode()), Some(a));
        assert_eq!(Anchor::decode("12"), None);
        assert_eq!(Anchor::decode("x 1"), None);
        let clock = Clock::system();
        let time = Timeline::start(clock.clone(), None);
        let before = time.anchor();
        assert_eq!(time.step_since(before), None);
        clock.step_wall(7_200_000);
        let step = time.step_since(before).unwrap();
        assert!((7_199_000..=7_200_500).contains(&step), "{step}");
        clock.step_wall(-14_400_000);
        let step = time.step_since(before).unwrap();
        assert!((-7_200_500..=-7_199_000).contains(&step), "{step}");
    }
}
