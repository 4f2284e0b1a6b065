//! Mean and 95% confidence interval (Student t) over seeds.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// Arithmetic mean; 0 for no values.
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Sample standard deviation (n - 1); 0 for fewer than two values.
pub fn std_dev(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}

/// Half-width of the two-sided 95% confidence interval of the mean: t(0.975, n-1) * s / sqrt(n).
/// 0 for fewer than two values (no spread can be estimated).
pub fn ci95(xs: &[f64]) -> f64 {
    let n = xs.len();
    if n < 2 {
        return 0.0;
    }
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64).map(|d| d.inverse_cdf(0.975)).unwrap_or(f64::NAN);
    t * std_dev(xs) / (n as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_uses_student_t() {
        // n = 2: t(0.975, 1) = 12.706; s = sqrt(2); ci = 12.706 * sqrt(2) / sqrt(2).
        assert!((ci95(&[1.0, 3.0]) - 12.7062).abs() < 1e-3, "{}", ci95(&[1.0, 3.0]));
        // n = 10 of 0..9: s = 3.02765, t(0.975, 9) = 2.26216.
        let xs: Vec<f64> = (0..10).map(f64::from).collect();
        assert!((ci95(&xs) - 2.26216 * 3.02765 / 10f64.sqrt()).abs() < 1e-3);
        assert_eq!(mean(&xs), 4.5);
        assert_eq!(ci95(&[5.0]), 0.0);
        assert_eq!(ci95(&[2.0, 2.0, 2.0]), 0.0);
    }
}
