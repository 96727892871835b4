//! Sizes on the command line, shared by `pmkv serve` (`--maxmemory`, output limits) and
//! the key-value commands (`--initial-size`): in a module of its own so that neither
//! command's module imports the other's.

/// A size as Redis writes them in its configuration: bytes, or with `k`/`m`/`g` (powers of
/// 1000) or `kb`/`mb`/`gb` (powers of 1024), any case.
pub(crate) fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mul) =
        [("gb", 1u64 << 30), ("mb", 1 << 20), ("kb", 1 << 10), ("g", 1_000_000_000), ("m", 1_000_000), ("k", 1000)]
            .iter()
            .find_map(|&(u, m)| t.strip_suffix(u).map(|n| (n.to_string(), m)))
            .unwrap_or((t.clone(), 1));
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| format!("{s:?} is not a size (bytes, or with k, kb, m, mb, g, gb)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_redis_writes_them() {
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("4k"), Ok(4000));
        assert_eq!(parse_size("4KB"), Ok(4096));
        assert_eq!(parse_size("16mb"), Ok(16 << 20));
        assert_eq!(parse_size("1gb"), Ok(1 << 30));
        assert!(parse_size("lots").is_err() && parse_size("-1").is_err() && parse_size("").is_err());
    }
}
