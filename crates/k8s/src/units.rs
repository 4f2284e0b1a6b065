//! Kubernetes quantities and RFC 3339 timestamps, without a date or decimal library.

/// Parses a Kubernetes quantity (`8`, `500m`, `2Ki`, `1.5G`, `1e3`) into a number.
/// Errors name what was wrong; the caller adds the field.
pub fn parse_quantity(s: &str) -> Result<f64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty quantity".into());
    }
    const SUFFIXES: [(&str, f64); 13] = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("Pi", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("Ei", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
    ];
    let (num, mult) = SUFFIXES
        .iter()
        .find_map(|(suf, m)| t.strip_suffix(suf).map(|n| (n, *m)))
        .or_else(|| t.strip_suffix('P').map(|n| (n, 1e15)))
        .or_else(|| t.strip_suffix('E').filter(|n| !n.is_empty() && !n.ends_with(['e', 'E'])).map(|n| (n, 1e18)))
        .unwrap_or((t, 1.0));
    let ok = !num.is_empty() && num.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | '+' | '-' | 'e' | 'E'));
    let v: f64 = if ok {
        num.parse().map_err(|_| format!("`{s}` is not a quantity"))?
    } else {
        return Err(format!("`{s}` is not a quantity"));
    };
    let v = v * mult;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("`{s}` is not a non-negative finite quantity"));
    }
    Ok(v)
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses an RFC 3339 timestamp (`2024-05-01T10:00:00Z`, fractions and offsets allowed) into
/// Unix seconds.
pub fn parse_rfc3339(s: &str) -> Result<f64, String> {
    let err = || format!("`{s}` is not an RFC 3339 time");
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(err());
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, String> {
        let part = s.get(r).ok_or_else(err)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return Err(err());
        }
        part.parse::<i64>().map_err(|_| err())
    };
    let (y, mo, d, h, mi, se) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return Err(err());
    }
    let mut rest = &s[19..];
    let mut frac = 0.0;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return Err(err());
        }
        frac = format!("0.{}", &r[..n]).parse::<f64>().map_err(|_| err())?;
        rest = &r[n..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        // By bytes: a multi-byte character there made a string slice panic.
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && o.as_bytes()[3] == b':' => {
            let oh = num(s.len() - 5..s.len() - 3)?;
            let om = num(s.len() - 2..s.len())?;
            let sign = if o.starts_with('-') { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
        _ => return Err(err()),
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + se - offset;
    Ok(secs as f64 + frac)
}

/// Formats Unix seconds as RFC 3339 in UTC, whole seconds (`2024-05-01T10:00:00Z`), as Go's
/// `time.RFC3339` writes a UTC time.
pub fn format_rfc3339(unix_s: i64) -> String {
    let days = unix_s.div_euclid(86_400);
    let sod = unix_s.rem_euclid(86_400);
    // civil_from_days (Hinnant).
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", sod / 3600, sod % 3600 / 60, sod % 60)
}

/// Parses a Go duration (`time.ParseDuration`): an optional sign, then one or more decimal
/// numbers each with a unit `ns`, `us` (`µs`, `μs`), `ms`, `s`, `m`, `h` (`1h30m`, `300s`,
/// `1.5m`); `0` alone is allowed. Seconds.
pub fn parse_go_duration(s: &str) -> Result<f64, String> {
    let bad = |why: &str| format!("`{s}` is not a Go duration ({why}; e.g. `300s`, `5m`, `1h30m`)");
    let (sign, mut rest) = match s.strip_prefix('-') {
        Some(r) => (-1.0, r),
        None => (1.0, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Ok(0.0);
    }
    if rest.is_empty() {
        return Err(bad("empty"));
    }
    let mut total = 0.0;
    while !rest.is_empty() {
        let n = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (num, tail) = rest.split_at(n);
        if num.is_empty() || num == "." {
            return Err(bad("a number must come before each unit"));
        }
        let v: f64 = num.parse().map_err(|_| bad("unreadable number"))?;
        let u = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, next) = tail.split_at(u);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(bad("missing unit")),
            _ => return Err(bad("unknown unit")),
        };
        total += v * scale;
        rest = next;
    }
    if !total.is_finite() {
        return Err(bad("too large"));
    }
    Ok(sign * total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("8").unwrap(), 8.0);
        assert_eq!(parse_quantity("2Ki").unwrap(), 2048.0);
        assert_eq!(parse_quantity("500m").unwrap(), 0.5);
        assert_eq!(parse_quantity("1e3").unwrap(), 1000.0);
        assert_eq!(parse_quantity("3E").unwrap(), 3e18);
        assert!(parse_quantity("").is_err());
        assert!(parse_quantity("eight").is_err());
        assert!(parse_quantity("-1").is_err());
        assert!(parse_quantity("1Zi").is_err());
    }

    #[test]
    fn times_round_trip() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z").unwrap(), 0.0);
        assert_eq!(parse_rfc3339("2024-03-01T12:30:05Z").unwrap(), 1_709_296_205.0);
        assert_eq!(parse_rfc3339("2024-03-01T14:30:05+02:00").unwrap(), 1_709_296_205.0);
        assert_eq!(parse_rfc3339("2024-03-01T12:30:05.5Z").unwrap(), 1_709_296_205.5);
        assert_eq!(format_rfc3339(1_709_296_205), "2024-03-01T12:30:05Z");
        assert!(parse_rfc3339("2024-13-01T00:00:00Z").is_err());
        assert!(parse_rfc3339("yesterday").is_err());
        assert!(parse_rfc3339("2024-03-01T12:30:05").is_err());
        // A multi-byte character in the offset (HAMi's lock annotation is free text): an
        // error, not a panic on a string slice inside the character.
        assert!(parse_rfc3339("2024-03-01T12:30:05+0\u{e9}00").is_err());
    }

    #[test]
    fn go_durations() {
        let good = [
            ("300s", 300.0),
            ("5m", 300.0),
            ("1h30m", 5400.0),
            ("1.5m", 90.0),
            ("250ms", 0.25),
            ("0", 0.0),
            ("-2s", -2.0),
        ];
        for (text, secs) in good {
            assert_eq!(parse_go_duration(text).unwrap(), secs, "{text}");
        }
        for bad in ["", "5", "m", "5x", "1h 30m", "five minutes", "."] {
            assert!(parse_go_duration(bad).unwrap_err().contains("not a Go duration"), "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panic(s in ".{0,40}") {
            let _ = parse_go_duration(&s);
            let _ = parse_quantity(&s);
            let _ = parse_rfc3339(&s);
        }

        #[test]
        fn format_then_parse(t in 0i64..4_000_000_000) {
            proptest::prop_assert_eq!(parse_rfc3339(&format_rfc3339(t)).unwrap(), t as f64);
        }
    }
}
