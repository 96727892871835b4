//! [`CapturedModule`]: a library built by pmkv-mangosteen-build (a program's own module,
//! or the engine's map), loaded from memory and checked before any of its code is used.

use super::abi::{self, Ctx, WriteFn};
use crate::error::{Error, Result};
use std::ffi::{c_void, CStr};
use std::sync::Mutex;

/// A module compiled with compiler capture by pmkv-mangosteen-build, loaded into the
/// process (once per image, for the process's life: its functions are kept by the
/// regions that use it). Its writes are captured by its own copy of the hooks, which
/// the runtime starts and stops around each batch.
///
/// Made only by [`CapturedModule::load`], which refuses a library that was not built by
/// the helper (it lacks the helper's marker, or its capture ABI is another release's),
/// before running any of its code.
pub struct CapturedModule {
    pub(crate) capture_begin: unsafe extern "C" fn(*mut Ctx),
    pub(crate) capture_end: unsafe extern "C" fn(),
    /// `capture_root!`'s creation of the root, if the module declares one.
    pub(crate) create: Option<unsafe extern "C" fn(*mut u8, usize) -> u64>,
    /// The tag of the root's type (`abi::type_tag`), if the module declares one.
    pub(crate) root_tag: Option<u64>,
    /// The `dlopen` handle (never closed).
    handle: usize,
}

impl std::fmt::Debug for CapturedModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapturedModule").field("handle", &self.handle).field("root_tag", &self.root_tag).finish()
    }
}

/// The images loaded so far, by address and length, and their modules.
static LOADED: Mutex<Vec<(usize, usize, &'static CapturedModule)>> = Mutex::new(Vec::new());

/// Why a library is refused: the fix, for every case.
const BUILD_IT: &str = "build the module with pmkv_mangosteen_build::compile in the build script of this \
    release, and embed that output (include_bytes!(concat!(env!(\"OUT_DIR\"), \"/<name>.so\")))";

impl CapturedModule {
    /// Load the library `image` (the bytes pmkv-mangosteen-build wrote to `OUT_DIR`), or
    /// find it loaded already. Refused ([`Error::NotInstrumented`]): an image without the
    /// helper's marker (built any other way: its writes would not be captured, would be
    /// acknowledged and lost), or built for another capture ABI; one the dynamic linker
    /// cannot load, or lacking the helper's entry points.
    pub fn load(image: &'static [u8]) -> Result<&'static CapturedModule> {
        let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
        let key = (image.as_ptr() as usize, image.len());
        if let Some((_, _, m)) = loaded.iter().find(|(p, n, _)| (*p, *n) == key) {
            return Ok(m);
        }
        let m: &'static CapturedModule = Box::leak(Box::new(load(image).map_err(Error::NotInstrumented)?));
        loaded.push((key.0, key.1, m));
        Ok(m)
    }

    /// The address of the module's symbol `name`.
    pub(crate) fn symbol(&self, name: &CStr) -> std::result::Result<*mut c_void, String> {
        // SAFETY: a live handle (never closed) and a NUL-terminated name.
        let p = unsafe { libc::dlsym(self.handle as *mut c_void, name.as_ptr()) };
        if p.is_null() {
            Err(format!("the captured module lacks {name:?}"))
        } else {
            Ok(p)
        }
    }

    /// The write `name` (`capture_write!`) and its signature's tag.
    pub(crate) fn write_fn(&self, name: &str) -> std::result::Result<(WriteFn, u64), String> {
        let c = |prefix: &str| std::ffi::CString::new(format!("{prefix}{name}")).map_err(|e| e.to_string());
        let op = self.symbol(&c("pmkv_mgop_")?).map_err(|_| format!("the captured module has no write {name:?}"))?;
        let sig = self.symbol(&c("pmkv_mgsig_")?)?;
        // SAFETY: `capture_write!` exports both with these signatures (ABI checked at load).
        unsafe {
            let sig: extern "C" fn() -> u64 = func(sig);
            Ok((func(op), sig()))
        }
    }
}

/// The `dlerror` message.
fn dlerror() -> String {
    // SAFETY: `dlerror` returns null or a NUL-terminated string valid until the next call.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: as above.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// Where the helper's marker (`abi::MARK`, its ABI digits left out) lies in `image`.
fn find_mark(image: &[u8]) -> Option<usize> {
    let head = &abi::MARK[..abi::MARK.len() - 3];
    image.windows(abi::MARK.len()).position(|w| w.starts_with(head))
}

fn load(image: &[u8]) -> std::result::Result<CapturedModule, String> {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    let Some(at) = find_mark(image) else {
        return Err(format!(
            "this library was not built by pmkv-mangosteen-build (it lacks the helper's marker): code not \
             compiled with capture would have its writes acknowledged and lost at the next open; {BUILD_IT}"
        ));
    };
    if image[at..at + abi::MARK.len()] != abi::MARK {
        let theirs = String::from_utf8_lossy(&image[at + abi::MARK.len() - 3..at + abi::MARK.len() - 1]).into_owned();
        return Err(format!(
            "this library was built for capture ABI {theirs}, where this pmkv-mangosteen needs {}: {BUILD_IT}",
            abi::ABI
        ));
    }
    // A fully static program (`cc -static`) has no dynamic linker (no AT_BASE): its
    // `dlopen` would load a second C library beside the program's, and the library then
    // crashes. Refuse with the link line that works instead.
    // SAFETY: `getauxval` reads the auxiliary vector; any type is accepted.
    if unsafe { libc::getauxval(libc::AT_BASE) } == 0 {
        return Err("a fully static program cannot load the instrumented library (it needs the dynamic \
                    linker): link libpmkv statically and the C library dynamically, \
                    -Wl,-Bstatic $(pkg-config --static --libs pmkv) -Wl,-Bdynamic"
            .into());
    }
    // SAFETY: a NUL-terminated name; the flag is valid.
    let fd = unsafe { libc::memfd_create(c"pmkv-mangosteen-module".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: a descriptor we just opened and own.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(image).map_err(|e| format!("writing the captured module: {e}"))?;
    let path = std::ffi::CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL in a path of digits");
    // SAFETY: loading a library the helper built (its marker checked above); its
    // initializers are the Rust runtime's. It stays loaded for the process's life.
    let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    drop(file);
    if h.is_null() {
        return Err(format!("loading the captured module: {}", dlerror()));
    }
    let mut m = CapturedModule {
        capture_begin: noop_begin,
        capture_end: noop_end,
        create: None,
        root_tag: None,
        handle: h as usize,
    };
    // SAFETY: (this `func` and every one below) each symbol is the `extern "C"` function
    // of that name in `instrumented/rt.rs`, whose signature is the one named here (the ABI
    // version, checked first, is bumped whenever one changes).
    let abi_fn: unsafe extern "C" fn() -> u32 = unsafe { func(m.symbol(c"pmkv_mgmod_abi")?) };
    // SAFETY: as above.
    let version = unsafe { abi_fn() };
    if version != abi::ABI {
        return Err(format!("captured module ABI {version} where {} is needed: {BUILD_IT}", abi::ABI));
    }
    // SAFETY: as above.
    unsafe {
        m.capture_begin = func(m.symbol(c"pmkv_mgmod_capture_begin")?);
        m.capture_end = func(m.symbol(c"pmkv_mgmod_capture_end")?);
        m.create = m.symbol(c"pmkv_mgmod_create").ok().map(|p| func(p));
        m.root_tag = m.symbol(c"pmkv_mgmod_root_tag").ok().map(|p| func::<extern "C" fn() -> u64>(p)());
    }
    Ok(m)
}

unsafe extern "C" fn noop_begin(_: *mut Ctx) {}
unsafe extern "C" fn noop_end() {}

/// A symbol's address as the function pointer type `F`.
///
/// # Safety
///
/// `p` is the address of a function whose ABI and signature are `F`'s.
pub(crate) unsafe fn func<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>(), "F is a function pointer");
    // SAFETY: same size (asserted); the caller's contract makes the bits a valid `F`.
    unsafe { std::mem::transmute_copy(&p) }
}
