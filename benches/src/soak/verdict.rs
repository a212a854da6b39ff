//! Leak judgement from the samples, as pure functions: the median of the first quarter of the
//! run (after a warm-up) against the median of the last quarter, with a tolerance per
//! quantity. Medians rather than means, because a sample that lands during a flap (four
//! sockets fewer, a reconnect task more) or a 64 MiB upload (a transient buffer) is an outlier
//! of the moment, not a trend.

/// One quantity over the run, after the warm-up.
#[derive(Debug, Clone, PartialEq)]
pub struct Trend {
    /// Median of the first quarter of the samples.
    pub first_quarter: f64,
    /// Median of the last quarter.
    pub last_quarter: f64,
    /// Smallest and largest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Samples judged.
    pub samples: usize,
}

impl Trend {
    /// Growth from the first quarter to the last.
    pub fn growth(&self) -> f64 {
        self.last_quarter - self.first_quarter
    }
}

/// How much a quantity may grow between the quarters: the larger of an absolute amount and a
/// share of the first quarter's level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    /// Absolute allowance, in the quantity's unit.
    pub absolute: f64,
    /// Allowance as a share of the first quarter's median.
    pub relative: f64,
}

impl Tolerance {
    /// The growth allowed from `level`.
    pub fn allowed(&self, level: f64) -> f64 {
        self.absolute.max(self.relative * level)
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The trend of `(seconds, value)` points taken at or after `warmup` seconds; `None` with
/// fewer than four such points (no quarters to compare).
pub fn trend(points: &[(f64, f64)], warmup: f64) -> Option<Trend> {
    let kept: Vec<f64> = points
        .iter()
        .filter(|(t, _)| *t >= warmup)
        .map(|(_, v)| *v)
        .collect();
    if kept.len() < 4 {
        return None;
    }
    let q = kept.len() / 4;
    let mut first = kept[..q].to_vec();
    let mut last = kept[kept.len() - q..].to_vec();
    Some(Trend {
        first_quarter: median(&mut first),
        last_quarter: median(&mut last),
        min: kept.iter().copied().fold(f64::INFINITY, f64::min),
        max: kept.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        samples: kept.len(),
    })
}

/// `Err` with the reason when `trend` grew by more than `tolerance` allows.
pub fn judge(name: &str, unit: &str, trend: &Trend, tolerance: Tolerance) -> Result<(), String> {
    let allowed = tolerance.allowed(trend.first_quarter);
    if trend.growth() > allowed {
        Err(format!(
            "{name} grew from {:.1} to {:.1} {unit} between the first and last quarter \
             (+{:.1}, tolerance +{:.1})",
            trend.first_quarter,
            trend.last_quarter,
            trend.growth(),
            allowed
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(values: &[f64]) -> Vec<(f64, f64)> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| (i as f64 * 10.0, *v))
            .collect()
    }

    #[test]
    fn quarters_use_medians_and_skip_the_warm_up() {
        // Warm-up (t < 20) at 1; first quarter 10, 10, 99 (outlier); last quarter 12.
        let p = points(&[
            1.0, 1.0, 10.0, 10.0, 99.0, 11.0, 11.0, 11.0, 12.0, 12.0, 12.0,
        ]);
        let t = trend(&p, 20.0).expect("enough samples");
        assert_eq!(t.samples, 9);
        assert_eq!(t.first_quarter, 10.0);
        assert_eq!(t.last_quarter, 12.0);
        assert_eq!((t.min, t.max), (10.0, 99.0));
        assert!(trend(&p[..5], 20.0).is_none());
    }

    #[test]
    fn growth_beyond_the_tolerance_fails() {
        let t = trend(
            &points(&[100.0, 100.0, 100.0, 100.0, 130.0, 130.0, 130.0, 130.0]),
            0.0,
        )
        .unwrap();
        let loose = Tolerance {
            absolute: 5.0,
            relative: 0.5,
        };
        let tight = Tolerance {
            absolute: 5.0,
            relative: 0.1,
        };
        assert!(judge("x", "u", &t, loose).is_ok());
        let e = judge("x", "u", &t, tight).unwrap_err();
        assert!(e.contains("100.0 to 130.0"), "{e}");
        // Shrinking is never a leak.
        let down = trend(&points(&[9.0, 9.0, 9.0, 9.0, 1.0, 1.0, 1.0, 1.0]), 0.0).unwrap();
        assert!(judge("x", "u", &down, tight).is_ok());
    }
}
