// Mangosteen, an in-memory map made durable: its region is sized when the pool is created
// (`region_mib`) and does not grow, so a full region is an error to handle (`Full`), not
// a crash; what was written before stays, and deleting makes room again.
//
// ```sh
// cargo run --release -p pmkv --example mangosteen_region
// ```

use pmkv::{ErrorKind, Options, Store};

fn main() -> Result<(), pmkv::Error> {
    let opts = Options::default().param("region_mib", "1"); // 1 MiB, fixed at creation
    let store = Store::open("sessions.pool", "mangosteen", &opts)?;
    let value = vec![b'x'; 1000];
    let mut written = 0u32;
    let full = loop {
        match store.put(format!("session:{written:05}").as_bytes(), &value) {
            Ok(()) => written += 1,
            Err(e) if e.kind() == ErrorKind::Full => break e,
            Err(e) => return Err(e),
        }
    };
    println!("{written} sessions written; the next write: {full}");
    for i in 0..10 {
        store.delete(format!("session:{i:05}").as_bytes())?; // deleting frees room...
    }
    store.put(b"session:00000", b"renewed")?; // ... for a write again
    println!("{} sessions stored", store.len()?);
    store.close()
}
