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
    /// The probability of at least `wins` right guesses if every guess were right at its own
    /// chance rate: the exact one-sided p-value of the run (the tail of the Poisson binomial
    /// of the trials' chances).
    pub p_value: f64,
}

/// Whether an attack beat chance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Verdict {
    /// No guess could be scored.
    NoData,
    /// The success rate is not significantly above chance (`p_value` is at least
    /// [`ALPHA_TABLE`]).
    AtChance,
    /// The attack wins: `p_value` is below [`ALPHA_TABLE`].
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
            p_value: tail_at_least(wins, trials.iter().map(|t| t.chance)),
        }
    }

    /// Whether the run beats chance at the one-sided significance level `alpha`: at least one
    /// guess was scored and `p_value` is below `alpha`.
    ///
    /// The test is exact, so it holds for the few trials of an active phase too: with three
    /// victims at a chance of 1/12, two right guesses happen by luck in 2% of honest runs,
    /// which the Wilson interval at the same level would call a win.
    pub fn beats_chance(&self, alpha: f64) -> bool {
        self.trials > 0 && self.p_value < alpha
    }

    /// The verdict of the table, at [`ALPHA_TABLE`].
    pub fn verdict(&self) -> Verdict {
        if self.trials == 0 {
            Verdict::NoData
        } else if self.beats_chance(ALPHA_TABLE) {
            Verdict::Wins
        } else {
            Verdict::AtChance
        }
    }
}

/// The normal quantile of the table's 95% intervals.
pub const Z_95: f64 = 1.96;

/// The significance level of the table's verdicts: one-sided 2.5%, the side above chance of
/// the 95% intervals it prints.
pub const ALPHA_TABLE: f64 = 0.025;

/// The significance level of a one-sided 95% test: the leaky-setting check asks only whether
/// an attack beats chance (never whether it falls below), so it tests one side.
pub const ALPHA_ONE_SIDED_95: f64 = 0.05;

/// The significance level that keeps the family-wise error of a whole run at 5%: one-sided
/// 0.143% per attack (Bonferroni over 35 attacks). The test command's "no open channel"
/// check uses it, so that one of thirty-odd honest attacks landing above its 95% interval by
/// luck does not fail the run.
pub const ALPHA_FAMILY: f64 = 0.05 / 35.0;

/// The probability that at least `wins` of independent trials succeed, each at its own
/// success probability in `chances` (the upper tail of the Poisson binomial distribution).
pub fn tail_at_least(wins: usize, chances: impl IntoIterator<Item = f64>) -> f64 {
    // ways[k]: the probability of exactly k successes among the trials so far.
    let mut ways = vec![1.0_f64];
    for c in chances {
        let c = c.clamp(0.0, 1.0);
        let mut next = vec![0.0; ways.len() + 1];
        for (k, w) in ways.iter().enumerate() {
            next[k] += w * (1.0 - c);
            next[k + 1] += w * c;
        }
        ways = next;
    }
    ways.iter().skip(wins).sum::<f64>().min(1.0)
}

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

    #[test]
    fn the_tail_is_the_binomial_one_when_every_chance_is_the_same() {
        // 2 of 3 at 1/12: 3 (1/12)^2 (11/12) + (1/12)^3.
        let p: f64 = 1.0 / 12.0;
        let want = 3.0 * p * p * (1.0 - p) + p.powi(3);
        assert!((tail_at_least(2, [p; 3]) - want).abs() < 1e-12);
        assert!((tail_at_least(0, [p; 3]) - 1.0).abs() < 1e-12);
        assert_eq!(tail_at_least(4, [p; 3]), 0.0);
        // 17 of 20 at 1/2: 1351 / 2^20.
        let want = 1351.0 / f64::from(1 << 20);
        assert!((tail_at_least(17, [0.5; 20]) - want).abs() < 1e-12);
        // Chances that differ: P(both) = 0.5 * 0.2.
        assert!((tail_at_least(2, [0.5, 0.2]) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn the_family_check_holds_few_trials_to_its_level() {
        let t = |success, chance| Trial { success, chance };
        let p = 1.0 / 12.0;
        // Two right guesses of three at 1/12 happen in 2% of honest runs: not a win at the
        // family-wise level, though the Wilson interval at the same level is above chance.
        let two_of_three = Measured::of(&[t(true, p), t(true, p), t(false, p)]);
        assert!(wilson_at(2, 3, 2.98).0 > p);
        assert!(!two_of_three.beats_chance(ALPHA_FAMILY));
        assert!(two_of_three.beats_chance(ALPHA_ONE_SIDED_95));
        // Three of three (1 in 1,728) is.
        let three_of_three = Measured::of(&[t(true, p); 3]);
        assert!(three_of_three.beats_chance(ALPHA_FAMILY));
        // Many trials: 17 of 20 at 1/2 is a win at the family-wise level, 16 of 20 is not.
        let run = |wins: usize| -> Vec<Trial> { (0..20).map(|i| t(i < wins, 0.5)).collect() };
        assert!(Measured::of(&run(17)).beats_chance(ALPHA_FAMILY));
        assert!(!Measured::of(&run(16)).beats_chance(ALPHA_FAMILY));
        assert!(!Measured::of(&[]).beats_chance(ALPHA_ONE_SIDED_95));
    }
}
