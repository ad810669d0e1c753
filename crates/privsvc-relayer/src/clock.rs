//! The relayer's clocks (docs/RELIABILITY.md, "Clocks that step").
//!
//! Two readings, never mixed:
//! - the timeline ([`Timeline::now_ms`]): monotonic milliseconds for every wait, deadline and
//!   retry of the relayer (batch windows, holds, status retention, rate-limit windows). It never
//!   steps when the wall clock does. It continues across restarts: an anchor (a timeline reading
//!   with the machine's uptime and the wall time at that moment, [`Anchor`]) is stored every
//!   [`ANCHOR_EVERY`], and the next start resumes the timeline at the anchor plus the time
//!   elapsed since: by the machine's uptime when the machine has not rebooted since (exact,
//!   whatever the wall clock did), else by the wall clock (nothing when it went back). A
//!   database without an anchor starts the timeline at the wall time, so the times a database
//!   stored before anchors existed keep their meaning.
//! - the wall clock ([`Timeline::wall_ms`]): only where the protocol names wall time: the
//!   envelope's hour window, token epochs, and times shown to users (`lastBeat`).
//!
//! [`Clock`] is the source of both, a value handed to the relayer in its configuration (never a
//! global): the system's clocks in a deployment, and in tests the same with a wall clock that
//! the test steps ([`Clock::step_wall`]) as an NTP correction or a VM restore would.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the timeline's anchor is stored: after a reboot, a wall-clock step within this
/// time before the relayer stopped is the only step a restart can mistake for elapsed time.
pub const ANCHOR_EVERY: Duration = Duration::from_secs(10);

/// A difference between the wall clock's and the timeline's progress above this is logged as
/// a step of the wall clock.
const STEP_REPORTED: u64 = 2_000;

/// The sources of time: a monotonic clock, the wall clock and the machine's uptime. Cheap to
/// clone; clones share the test offsets.
#[derive(Clone)]
pub struct Clock {
    inner: Arc<ClockInner>,
}

struct ClockInner {
    origin: Instant,
    /// Added to the system's wall clock ([`Clock::step_wall`]).
    wall_step_ms: AtomicI64,
    /// Added to every clock ([`Clock::advance`]).
    advanced_ms: AtomicU64,
}

impl Clock {
    /// The system's clocks: `std::time::Instant` (monotonic), `SystemTime` (wall) and the
    /// machine's uptime.
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

    /// The machine's uptime (ms since boot, Linux's `/proc/uptime`: steps of the wall clock do
    /// not move it, and every process of the machine reads the same) and its boot's id; `None`
    /// where the system does not say.
    pub fn uptime(&self) -> Option<Uptime> {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let text = std::fs::read_to_string("/proc/uptime").ok()?;
        let secs: f64 = text.split_whitespace().next()?.parse().ok()?;
        let ms = (secs * 1_000.0) as u64;
        Some(Uptime {
            boot: boot.trim().to_string(),
            ms: ms.saturating_add(self.inner.advanced_ms.load(Ordering::SeqCst)),
        })
    }

    /// Steps the wall clock by `by_ms` (negative: back), as an NTP correction or a VM restore
    /// does; the monotonic clock and the uptime do not move. For tests.
    pub fn step_wall(&self, by_ms: i64) {
        self.inner.wall_step_ms.fetch_add(by_ms, Ordering::SeqCst);
    }

    /// Moves every clock forward by `ms` at once, as if that much time had passed. For tests of
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

/// The machine's uptime ([`Clock::uptime`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uptime {
    /// The id of the machine's boot: uptimes of different boots do not compare.
    pub boot: String,
    /// Milliseconds since that boot.
    pub ms: u64,
}

/// A timeline reading, and the wall time and the machine's uptime at the same moment, stored
/// so that the next start can resume the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    /// The timeline, ms.
    pub timeline_ms: u64,
    /// The wall clock at that moment, Unix epoch ms.
    pub wall_ms: u64,
    /// The machine's uptime at that moment, when the system says.
    pub uptime: Option<Uptime>,
}

impl Anchor {
    /// The stored form: `"<timeline_ms> <wall_ms>"`, then `" <uptime_ms> <boot id>"` when the
    /// uptime is known.
    pub fn encode(&self) -> String {
        match &self.uptime {
            Some(u) => format!("{} {} {} {}", self.timeline_ms, self.wall_ms, u.ms, u.boot),
            None => format!("{} {}", self.timeline_ms, self.wall_ms),
        }
    }

    /// Parses [`Anchor::encode`]'s form; `None` when it does not parse.
    pub fn decode(text: &str) -> Option<Anchor> {
        let mut parts = text.split_whitespace();
        let timeline_ms = parts.next()?.parse().ok()?;
        let wall_ms = parts.next()?.parse().ok()?;
        let uptime = match (parts.next(), parts.next()) {
            (None, _) => None,
            (Some(ms), Some(boot)) => Some(Uptime {
                boot: boot.to_string(),
                ms: ms.parse().ok()?,
            }),
            (Some(_), None) => return None,
        };
        if parts.next().is_some() {
            return None;
        }
        Some(Anchor {
            timeline_ms,
            wall_ms,
            uptime,
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
    /// earlier run): at the anchor's timeline plus the time elapsed since the anchor, by the
    /// machine's uptime when it has not rebooted since, else by the wall clock (nothing when the
    /// wall clock is now behind the anchor's). Without an anchor the timeline starts at the wall
    /// time.
    pub fn start(clock: Clock, anchor: Option<Anchor>) -> Timeline {
        let wall = clock.wall_ms();
        let now = match anchor {
            Some(a) => {
                let by_uptime = match (&a.uptime, clock.uptime()) {
                    (Some(then), Some(now)) if then.boot == now.boot && now.ms >= then.ms => {
                        Some(now.ms - then.ms)
                    }
                    _ => None,
                };
                let elapsed = by_uptime.unwrap_or_else(|| wall.saturating_sub(a.wall_ms));
                a.timeline_ms.saturating_add(elapsed)
            }
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
            uptime: self.clock.uptime(),
        }
    }

    /// How far the wall clock stepped between anchor `earlier` and now, relative to the
    /// timeline (positive: forward), when that is more than a couple of seconds.
    pub fn step_since(&self, earlier: &Anchor) -> Option<i64> {
        let timeline = self.now_ms().saturating_sub(earlier.timeline_ms) as i128;
        let wall = self.wall_ms() as i128 - earlier.wall_ms as i128;
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
        // (its wall clock stepped forward 2 hours while it ran); no uptime known.
        let anchor = Anchor {
            timeline_ms: wall - 2 * HOUR - 600_000,
            wall_ms: wall - 600_000,
            uptime: None,
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
            uptime: None,
        };
        let time = Timeline::start(clock, Some(anchor));
        assert!(time.now_ms().abs_diff(1_000_000) < 1_000);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn on_the_same_boot_a_restart_counts_the_machines_uptime_not_the_wall_clock() {
        let clock = Clock::system();
        let up = clock.uptime().expect("linux has /proc/uptime");
        assert!(!up.boot.is_empty());
        // Stored a minute ago (by the uptime) by a relayer whose clock was an hour slow; the
        // clock was corrected meanwhile: the wall clock says 61 minutes passed, the machine 1.
        let anchor = Anchor {
            timeline_ms: 5 * HOUR,
            wall_ms: clock.wall_ms() - HOUR - 60_000,
            uptime: Some(Uptime {
                boot: up.boot.clone(),
                ms: up.ms - 60_000,
            }),
        };
        let time = Timeline::start(clock.clone(), Some(anchor.clone()));
        assert!(time.now_ms().abs_diff(5 * HOUR + 60_000) < 1_000);
        // Another boot: the uptimes do not compare, the wall clock decides.
        let rebooted = Anchor {
            uptime: Some(Uptime {
                boot: "another-boot".into(),
                ms: up.ms - 60_000,
            }),
            ..anchor
        };
        let time = Timeline::start(clock, Some(rebooted));
        assert!(time.now_ms().abs_diff(6 * HOUR + 60_000) < 1_000);
    }

    #[test]
    fn anchors_round_trip_and_steps_are_reported() {
        let a = Anchor {
            timeline_ms: 12,
            wall_ms: 34,
            uptime: None,
        };
        assert_eq!(Anchor::decode(&a.encode()), Some(a.clone()));
        let b = Anchor {
            uptime: Some(Uptime {
                boot: "0b1d".into(),
                ms: 56,
            }),
            ..a
        };
        assert_eq!(Anchor::decode(&b.encode()), Some(b));
        assert_eq!(Anchor::decode("12"), None);
        assert_eq!(Anchor::decode("x 1"), None);
        assert_eq!(Anchor::decode("1 2 3"), None);
        assert_eq!(Anchor::decode("1 2 3 boot extra"), None);
        let clock = Clock::system();
        let time = Timeline::start(clock.clone(), None);
        let before = time.anchor();
        assert_eq!(time.step_since(&before), None);
        clock.step_wall(7_200_000);
        let step = time.step_since(&before).unwrap();
        assert!((7_199_000..=7_200_500).contains(&step), "{step}");
        clock.step_wall(-14_400_000);
        let step = time.step_since(&before).unwrap();
        assert!((-7_200_500..=-7_199_000).contains(&step), "{step}");
    }
}
