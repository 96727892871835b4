//! A small key-value application on the callback API, used by the `mangosteen-kv` RPC
//! server and its crash test: 8-byte keys and values in an open-addressing table of
//! 32-byte slots (one block each) in the durable region.
//!
//! Requests: `S` + key + value (8 bytes each, little-endian) sets; `G` + key gets (the
//! response is the 8-byte value, or empty if absent); `N` counts the keys.

use crate::callback::Application;
use crate::tx::Tx;

const SLOT: usize = 32;

/// The application (stateless: its state is the region).
pub struct KvApp;

/// A parsed request.
pub enum KvRequest {
    Set(u64, u64),
    Get(u64),
    Count,
}

fn slot_of(region_len: usize, key: u64) -> usize {
    let n = region_len / SLOT;
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 16) as usize % n
}

fn word(r: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(r[at..at + 8].try_into().expect("8 bytes"))
}

/// The slot holding `key`, or the empty slot where it would go (`None`: table full).
fn find(r: &[u8], key: u64) -> Option<usize> {
    let n = r.len() / SLOT;
    let mut i = slot_of(r.len(), key);
    for _ in 0..n {
        let at = i * SLOT;
        if word(r, at) == 0 || word(r, at + 8) == key {
            return Some(at);
        }
        i = (i + 1) % n;
    }
    None
}

impl Application for KvApp {
    type Client = ();
    type Request = KvRequest;

    fn init_client(&self) {}

    fn deserialize(&self, _: &mut (), b: &[u8]) -> Result<KvRequest, String> {
        let w = |i: usize| b.get(i..i + 8).map(|s| u64::from_le_bytes(s.try_into().expect("8 bytes")));
        match (b.first(), b.len()) {
            (Some(b'S'), 17) => Ok(KvRequest::Set(w(1).unwrap_or(0), w(9).unwrap_or(0))),
            (Some(b'G'), 9) => Ok(KvRequest::Get(w(1).unwrap_or(0))),
            (Some(b'N'), 1) => Ok(KvRequest::Count),
            _ => Err("bad request: expected S key value, G key or N".into()),
        }
    }

    fn is_read_only(&self, r: &KvRequest) -> bool {
        !matches!(r, KvRequest::Set(..))
    }

    fn process_read(&self, s: &[u8], r: &KvRequest) -> Vec<u8> {
        match r {
            KvRequest::Get(k) => match find(s, *k) {
                Some(at) if word(s, at) != 0 => word(s, at + 16).to_le_bytes().to_vec(),
                _ => Vec::new(),
            },
            KvRequest::Count => {
                let n = (0..s.len() / SLOT).filter(|i| word(s, i * SLOT) != 0).count() as u64;
                n.to_le_bytes().to_vec()
            }
            KvRequest::Set(..) => unreachable!("a write is never run as a read"),
        }
    }

    fn process_write(&self, tx: &mut Tx<'_>, r: &KvRequest) -> Vec<u8> {
        let KvRequest::Set(k, v) = *r else { return b"?".to_vec() };
        let Some(at) = find(tx.region(), k) else { return b"FULL".to_vec() };
        let mut slot = [0u8; 24];
        slot[..8].copy_from_slice(&1u64.to_le_bytes());
        slot[8..16].copy_from_slice(&k.to_le_bytes());
        slot[16..24].copy_from_slice(&v.to_le_bytes());
        match tx.write(at as u64, &slot) {
            Ok(()) => b"OK".to_vec(),
            Err(e) => e.to_string().into_bytes(),
        }
    }
}
