//! Redis Cluster's hash slots: CRC16 (XMODEM) of the key, or of its hash tag, modulo
//! 16,384 — bit for bit what Redis computes, so every cluster-aware client agrees with
//! the server on where a key lives.

use crate::resp::Reply;

/// Slots in a cluster.
pub const SLOTS: u16 = 16384;

const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);

/// The part of `key` that is hashed: the bytes between the first `{` and the next `}`
/// after it when there are any, else the whole key (Redis's hash tags).
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// `key`'s slot.
pub fn key_slot(key: &[u8]) -> u16 {
    CRC16.checksum(hash_tag(key)) & (SLOTS - 1)
}

/// The one slot of `keys` (`None`: no keys), or `-CROSSSLOT`.
pub fn common_slot<'a>(keys: impl IntoIterator<Item = &'a [u8]>) -> Result<Option<u16>, Reply> {
    let mut slot = None;
    for k in keys {
        let s = key_slot(k);
        match slot {
            None => slot = Some(s),
            Some(t) if t != s => {
                return Err(Reply::err("CROSSSLOT Keys in request don't hash to the same slot"));
            }
            _ => {}
        }
    }
    Ok(slot)
}

/// A slot number as a client writes it.
pub fn parse_slot(b: &[u8]) -> Option<u16> {
    std::str::from_utf8(b).ok()?.parse::<u16>().ok().filter(|&s| s < SLOTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_slots() {
        // Values from Redis's documentation and `CLUSTER KEYSLOT` on Redis 7.
        assert_eq!(key_slot(b"123456789"), 0x31c3 & 16383);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b""), 0);
        // Hash tags: the first {...} with something inside.
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"{"), b"{");
    }

    #[test]
    fn mixed_slots_are_crossslot() {
        assert_eq!(common_slot([&b"{a}1"[..], b"{a}2"]).unwrap(), Some(key_slot(b"a")));
        assert!(common_slot([&b"foo"[..], b"bar"]).is_err());
        assert_eq!(common_slot(std::iter::empty()).unwrap(), None);
        assert_eq!(parse_slot(b"16383"), Some(16383));
        assert_eq!(parse_slot(b"16384"), None);
        assert_eq!(parse_slot(b"-1"), None);
    }
}
