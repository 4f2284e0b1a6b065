//! Small timestamp parsers for the log formats (seconds; only differences matter).

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days in month `m` (1-12) of year `y`, Gregorian.
fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `YYYY/MM/DD` or `YYYY-MM-DD` or `YYYYMMDD` -> days since the epoch.
pub(crate) fn parse_date(s: &str) -> Option<i64> {
    if !s.is_ascii() {
        return None; // also keeps the byte slicing below on character boundaries
    }
    let (y, m, d) = if s.len() == 8 && !s.contains(['/', '-']) {
        (num::<i64>(&s[..4])?, num::<u32>(&s[4..6])?, num::<u32>(&s[6..])?)
    } else {
        let mut it = s.split(['/', '-']);
        let r = (num::<i64>(it.next()?)?, num::<u32>(it.next()?)?, num::<u32>(it.next()?)?);
        if it.next().is_some() {
            return None;
        }
        r
    };
    if !(1..=12).contains(&m) || !(1..=days_in_month(y, m)).contains(&d) || !(1..=9999).contains(&y) {
        return None;
    }
    Some(days_from_civil(y, m, d))
}

/// `HH:MM:SS` or `HH:MM:SS.fff` -> seconds since midnight.
pub(crate) fn parse_time_of_day(s: &str) -> Option<f64> {
    let mut it = s.split(':');
    let h: u32 = num(it.next()?)?;
    let m: u32 = num(it.next()?)?;
    let sec = it.next()?;
    if it.next().is_some() || h > 23 || m > 59 {
        return None;
    }
    let (whole, frac) = match sec.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (sec, None),
    };
    let whole: u32 = num(whole)?;
    if whole > 60 {
        return None;
    }
    let frac = match frac {
        Some(f) => {
            num::<u64>(f)?;
            format!("0.{f}").parse::<f64>().ok()?
        }
        None => 0.0,
    };
    Some(f64::from(h * 3600 + m * 60 + whole) + frac)
}

/// `YYYY/MM/DD HH:MM:SS(.fff)` (nvidia-smi's `timestamp`; `-` dates and a `T` separator also
/// accepted) -> seconds since the epoch, ignoring time zones.
pub(crate) fn parse_datetime(s: &str) -> Option<f64> {
    let s = s.trim();
    let (date, time) = s.split_once([' ', 'T'])?;
    let days = parse_date(date.trim())?;
    let tod = parse_time_of_day(time.trim())?;
    Some(days as f64 * 86_400.0 + tod)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nvidia_smi_timestamps() {
        let a = parse_datetime("2026/11/25 23:59:59.500").unwrap();
        let b = parse_datetime("2026/11/26 00:00:00.250").unwrap();
        assert!((b - a - 0.75).abs() < 1e-6, "{}", b - a);
        assert_eq!(parse_datetime("1970-01-01T00:00:01"), Some(1.0));
        assert_eq!(parse_date("20240229"), parse_date("2024/02/29"));
        assert!(parse_date("2000/02/29").is_some() && parse_date("2026/12/31").is_some());
        for bad in [
            "",
            "ab€cde 00:00:00",
            "2026/13/01 00:00:00",
            "2026/02/31 00:00:00",
            "2026/02/29 00:00:00",
            "1900/02/29 00:00:00",
            "2026/04/31 00:00:00",
            "2026/11/25",
            "2026/11/25 25:00:00",
            "x/y/z 1:2:3",
            "2026/11/25 1:2:3.x",
        ] {
            assert_eq!(parse_datetime(bad), None, "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,30}", near in "[0-9€é/ :.T-]{0,24}") {
            let _ = parse_datetime(&s);
            let _ = parse_datetime(&near);
            let _ = parse_date(&near);
            let _ = parse_time_of_day(&near);
        }
    }
}
