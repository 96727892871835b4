use pmkv::{KeyRange, Options, Store, WriteBatch};
fn main() -> Result<(), pmkv::Error> {
    let store = Store::open("demo.pool", "hart", &Options::default())?; // creates it
    store.put(b"hello", b"world")?; // durable when it returns
    assert_eq!(store.get(b"hello")?.as_deref(), Some(&b"world"[..]));
    let mut batch = WriteBatch::new(); // all or nothing across a crash
    batch.put("a", "1").put("b", "2").delete("hello");
    store.write(&batch)?;
    for record in store.range(&KeyRange::all()) {
        let (key, value) = record?; // a cursor holds no lock between steps
        println!("{} = {}", String::from_utf8_lossy(&key), String::from_utf8_lossy(&value));
    }
    store.close() // reports what a drop would have to swallow
}
