//! Medians, percentiles and ranges of small sample sets; NaN when there is nothing to take
//! them of, which the tables show as `-`.

use std::borrow::Borrow;

fn sorted(values: impl IntoIterator<Item = impl Borrow<f64>>) -> Vec<f64> {
    let mut v: Vec<f64> = values.into_iter().map(|x| *x.borrow()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The median (mean of the middle two for an even count).
pub fn median(values: impl IntoIterator<Item = impl Borrow<f64>>) -> f64 {
    let v = sorted(values);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The `p`-th percentile (0..=100) by the nearest-rank method.
pub fn percentile(values: impl IntoIterator<Item = impl Borrow<f64>>, p: f64) -> f64 {
    let v = sorted(values);
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v.get(rank.clamp(1, v.len().max(1)) - 1)
        .copied()
        .unwrap_or(f64::NAN)
}

/// Smallest and largest value.
pub fn min_max(values: impl IntoIterator<Item = impl Borrow<f64>>) -> (f64, f64) {
    let v = sorted(values);
    let end = |x: Option<&f64>| x.copied().unwrap_or(f64::NAN);
    (end(v.first()), end(v.last()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_percentiles_ranges() {
        assert!(
            median([0.0; 0]).is_nan()
                && percentile([0.0; 0], 99.0).is_nan()
                && min_max([0.0; 0]).0.is_nan()
        );
        assert_eq!(median([3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median([4.0, 1.0, 2.0, 3.0]), 2.5);
        let v = (1..=100).map(f64::from);
        assert_eq!(
            [percentile(v.clone(), 99.0), percentile(v, 100.0)],
            [99.0, 100.0]
        );
        assert_eq!(percentile([7.0], 99.0), 7.0);
        assert_eq!(min_max([2.0, 9.0, 4.0]), (2.0, 9.0));
    }
}
