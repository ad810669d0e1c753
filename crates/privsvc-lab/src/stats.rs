//! Scoring: success rate, chance rate and a confidence interval for each attack.

/// One guess of an attack, scored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trial {
    /// Whether the guess was right.
    pub success: bool,
    /// The probability that guessing among the honest candidates is right.
    pub chance: f64,
}

/// How an attack did.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Measured {
    /// Guesses scored.
    pub trials: usize,
    /// Right guesses.
    pub wins: usize,
    /// Mean chance rate.
    pub chance: f64,
    /// Success rate.
    pub rate: f64,
    /// 95% Wilson interval of the success rate.
    pub low: f64,
    /// Upper end of the interval.
    pub high: f64,
}

/// Whether an attack beat chance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Verdict {
    /// No guess could be scored.
    NoData,
    /// The success rate is not significantly above chance (the interval reaches it).
    AtChance,
    /// The attack wins: the whole interval is above chance.
    Wins,
}

impl Measured {
    /// The figures of `trials`.
    pub fn of(trials: &[Trial]) -> Measured {
        let n = trials.len();
        let wins = trials.iter().filter(|t| t.success).count();
        let chance = if n == 0 {
            0.0
        } else {
            trials.iter().map(|t| t.chance).sum::<f64>() / n as f64
        };
        let (low, high) = wilson(wins, n);
        Measured {
            trials: n,
            wins,
            chance,
            rate: if n == 0 { 0.0 } else { wins as f64 / n as f64 },
            low,
            high,
        }
    }

    /// Whether the lower end of the interval for the normal quantile `z` is above chance.
    pub fn beats_chance_at(&self, z: f64) -> bool {
        self.trials > 0 && wilson_at(self.wins, self.trials, z).0 > self.chance + 1e-9
    }

    /// The verdict.
    pub fn verdict(&self) -> Verdict {
        if self.trials == 0 {
            Verdict::NoData
        } else if self.low > self.chance + 1e-9 {
            Verdict::Wins
        } else {
            Verdict::AtChance
        }
    }
}

/// The normal quantile of the table's 95% intervals.
pub const Z_95: f64 = 1.96;

/// The normal quantile of a one-sided 95% test: the leaky-setting check asks only whether an
/// attack beats chance (never whether it falls below), so it tests one side.
pub const Z_ONE_SIDED_95: f64 = 1.645;

/// The normal quantile that keeps the family-wise error of a whole run near 5%: one-sided
/// 0.143% per attack (Bonferroni over 35 attacks). The test command's "no open channel"
/// check uses it, so that one of thirty-odd honest attacks landing above its 95% interval by
/// luck does not fail the run.
pub const Z_FAMILY: f64 = 2.98;

/// The 95% Wilson score interval of `wins` successes in `n` trials.
pub fn wilson(wins: usize, n: usize) -> (f64, f64) {
    wilson_at(wins, n, Z_95)
}

/// The Wilson score interval of `wins` successes in `n` trials for the normal quantile `z`.
pub fn wilson_at(wins: usize, n: usize, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n = n as f64;
    let p = wins as f64 / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * ((p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt()) / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_known_values() {
        let (lo, hi) = wilson(50, 100);
        assert!((lo - 0.4038).abs() < 1e-3 && (hi - 0.5962).abs() < 1e-3);
        let (lo, hi) = wilson(0, 10);
        assert_eq!(lo, 0.0);
        assert!((hi - 0.2775).abs() < 1e-3);
    }

    #[test]
    fn verdicts() {
        let t = |success, chance| Trial { success, chance };
        assert_eq!(Measured::of(&[]).verdict(), Verdict::NoData);
        let always: Vec<Trial> = (0..20).map(|_| t(true, 0.1)).collect();
        assert_eq!(Measured::of(&always).verdict(), Verdict::Wins);
        let chance: Vec<Trial> = (0..20).map(|i| t(i % 10 == 0, 0.1)).collect();
        assert_eq!(Measured::of(&chance).verdict(), Verdict::AtChance);
        // One success where chance is nil is a win.
        assert_eq!(Measured::of(&[t(true, 0.0)]).verdict(), Verdict::Wins);
        assert_eq!(Measured::of(&[t(false, 0.0)]).verdict(), Verdict::AtChance);
    }
}
