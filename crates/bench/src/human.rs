//! Numbers as people read them: rates with a unit prefix (`20.8 M/s`, never
//! `20,815,813.978/s`), durations in minutes and seconds (`3 min 05 s`), and a median with
//! its spread (`211 (205–230)`). Every progress line and report of the harness goes
//! through these, so one command's output reads like another's.

/// `x` with three significant digits and an SI prefix: `950`, `12.3 k`, `20.8 M`, `1.25 G`.
/// Below 1: up to three decimals (`0.042`).
pub fn si(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    let a = x.abs();
    let (v, prefix) = if a >= 1e9 {
        (x / 1e9, " G")
    } else if a >= 1e6 {
        (x / 1e6, " M")
    } else if a >= 1e4 {
        (x / 1e3, " k")
    } else {
        (x, "")
    };
    format!("{}{prefix}", sig3(v))
}

/// Three significant digits, at least the integer part (`9999` stays `9999`).
fn sig3(v: f64) -> String {
    let a = v.abs();
    let decimals = if a == 0.0 || a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        3
    };
    format!("{v:.decimals$}")
}

/// An integer with thousands separators, for counts: `50,000`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate per second: `20.8 M/s`, `670/s`.
pub fn rate(per_sec: f64) -> String {
    format!("{}/s", si(per_sec))
}

/// A duration: `42 s`, `3 min 05 s`, `1 h 02 min`; tenths below 10 s (`4.2 s`).
pub fn duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "?".into();
    }
    if secs < 10.0 {
        return format!("{secs:.1} s");
    }
    let s = secs.round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, (s % 3600) / 60),
    }
}

/// A median with its range over repeated runs, each written by `f`: `211 (205–230)`;
/// just the median when the range would read as one number (one run, or runs that agree
/// to the digits shown).
pub fn with_range(median: f64, min: f64, max: f64, f: impl Fn(f64) -> String) -> String {
    let (lo, hi) = (f(min), f(max));
    if lo == hi || !(min.is_finite() && max.is_finite()) {
        f(median)
    } else {
        format!("{} ({lo}–{hi})", f(median))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_like_rates() {
        assert_eq!(rate(20_815_813.978), "20.8 M/s");
        assert_eq!(rate(94_073.0), "94.1 k/s");
        assert_eq!(rate(669.57), "670/s");
        assert_eq!(rate(2_500_000_000.0), "2.50 G/s");
        assert_eq!(si(0.0421), "0.042");
        assert_eq!(si(9_999.0), "9999");
        assert_eq!(si(f64::NAN), "–");
    }

    #[test]
    fn counts_get_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(50_000), "50,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn durations_read_like_durations() {
        assert_eq!(duration(4.24), "4.2 s");
        assert_eq!(duration(42.4), "42 s");
        assert_eq!(duration(185.0), "3 min 05 s");
        assert_eq!(duration(3725.0), "1 h 02 min");
        assert_eq!(duration(-1.0), "?");
    }

    #[test]
    fn a_range_is_shown_only_when_runs_differ() {
        let f = |x: f64| format!("{x:.0}");
        assert_eq!(with_range(211.0, 205.0, 230.0, f), "211 (205–230)");
        assert_eq!(with_range(211.0, 211.0, 211.0, f), "211");
        assert_eq!(with_range(0.0001, 0.0001, 0.0002, |x| format!("{x:.3}")), "0.000");
    }
}
