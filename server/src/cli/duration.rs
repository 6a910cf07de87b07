//! Durations written as Go writes them, the form the reference's variables take.

/// A Go duration (`10s`, `250ms`, `1m30s`, `1.5s`) in whole milliseconds, rounded up;
/// `None` if it is not one, or is zero.
pub fn go_duration_ms(text: &str) -> Option<u64> {
    const UNITS: [(&str, f64); 7] = [
        ("ns", 1e-6),
        ("us", 1e-3),
        ("µs", 1e-3),
        ("ms", 1.0),
        ("s", 1e3),
        ("m", 60e3),
        ("h", 3_600e3),
    ];
    let mut rest = text.trim();
    let mut total = 0.0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest.get(..digits)?.parse().ok()?;
        rest = rest.get(digits..)?;
        // The longest unit that matches: "ms" before "m".
        let (unit, scale) = UNITS
            .iter()
            .filter(|(u, _)| rest.starts_with(u))
            .max_by_key(|(u, _)| u.len())?;
        total += number * scale;
        rest = rest.get(unit.len()..)?;
    }
    let ms = total.ceil();
    (1.0..1e15).contains(&ms).then_some(ms as u64)
}
