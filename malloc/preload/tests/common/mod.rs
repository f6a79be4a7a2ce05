//! The built library, found beside the test binary, and its C functions.

#![allow(dead_code)] // each test file uses some of it

use std::ffi::{c_void, CString};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The library the package builds: beside the test binary (`target/<profile>/deps`,
/// where Cargo builds it for the tests), else in the profile's directory.
pub fn library_path() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("target/<profile>/deps");
    let name = "libmagazine_preload.so";
    let path = [deps.join(name), deps.join("..").join(name)]
        .into_iter()
        .find(|path| path.exists());
    path.unwrap_or_else(|| panic!("{name} not built beside {}", exe.display()))
}

/// The library's C functions, from `dlopen` (once per process; never closed).
pub struct Lib {
    malloc: unsafe extern "C" fn(usize) -> *mut c_void,
    free: unsafe extern "C" fn(*mut c_void),
    calloc: unsafe extern "C" fn(usize, usize) -> *mut c_void,
    realloc: unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void,
    reallocarray: unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void,
    posix_memalign: unsafe extern "C" fn(*mut *mut c_void, usize, usize) -> i32,
    aligned_alloc: unsafe extern "C" fn(usize, usize) -> *mut c_void,
    memalign: unsafe extern "C" fn(usize, usize) -> *mut c_void,
    valloc: unsafe extern "C" fn(usize) -> *mut c_void,
    pvalloc: unsafe extern "C" fn(usize) -> *mut c_void,
    malloc_usable_size: unsafe extern "C" fn(*mut c_void) -> usize,
}

/// The symbol `name` of `handle`, as a function pointer of type `F`.
///
/// # Safety
///
/// The symbol is a function of type `F`.
unsafe fn symbol<F: Copy>(handle: *mut c_void, name: &str) -> F {
    let name = CString::new(name).unwrap();
    // SAFETY: a handle from `dlopen`, a NUL-terminated name.
    let address = unsafe { libc::dlsym(handle, name.as_ptr()) };
    assert!(!address.is_null(), "{name:?} not exported");
    assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
    // SAFETY: the caller's contract: the symbol is a function of type `F`.
    unsafe { std::mem::transmute_copy(&address) }
}

impl Lib {
    pub fn get() -> &'static Lib {
        static LIB: OnceLock<Lib> = OnceLock::new();
        LIB.get_or_init(|| {
            let path = CString::new(library_path().into_os_string().into_encoded_bytes()).unwrap();
            // SAFETY: a NUL-terminated path; RTLD_LOCAL keeps the library's symbols out of
            // the process's lookups, so the test's own heap stays glibc's.
            let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            assert!(!handle.is_null(), "dlopen failed");
            // SAFETY: the library exports these functions with these C signatures.
            unsafe {
                Lib {
                    malloc: symbol(handle, "malloc"),
                    free: symbol(handle, "free"),
                    calloc: symbol(handle, "calloc"),
                    realloc: symbol(handle, "realloc"),
                    reallocarray: symbol(handle, "reallocarray"),
                    posix_memalign: symbol(handle, "posix_memalign"),
                    aligned_alloc: symbol(handle, "aligned_alloc"),
                    memalign: symbol(handle, "memalign"),
                    valloc: symbol(handle, "valloc"),
                    pvalloc: symbol(handle, "pvalloc"),
                    malloc_usable_size: symbol(handle, "malloc_usable_size"),
                }
            }
        })
    }

    // Each wrapper calls the C function; the tests keep C's contract (a block freed once,
    // by this library).
    pub fn malloc(&self, size: usize) -> *mut c_void {
        // SAFETY: no precondition.
        unsafe { (self.malloc)(size) }
    }
    pub fn free(&self, block: *mut c_void) {
        // SAFETY: the tests pass null or a live block of this library, once.
        unsafe { (self.free)(block) }
    }
    pub fn calloc(&self, count: usize, size: usize) -> *mut c_void {
        // SAFETY: no precondition.
        unsafe { (self.calloc)(count, size) }
    }
    pub fn realloc(&self, block: *mut c_void, size: usize) -> *mut c_void {
        // SAFETY: the tests pass null or a live block of this library.
        unsafe { (self.realloc)(block, size) }
    }
    pub fn reallocarray(&self, block: *mut c_void, count: usize, size: usize) -> *mut c_void {
        // SAFETY: as `realloc`.
        unsafe { (self.reallocarray)(block, count, size) }
    }
    pub fn posix_memalign(&self, out: &mut *mut c_void, align: usize, size: usize) -> i32 {
        // SAFETY: `out` is a valid place for a pointer.
        unsafe { (self.posix_memalign)(out, align, size) }
    }
    pub fn aligned_alloc(&self, align: usize, size: usize) -> *mut c_void {
        // SAFETY: no precondition.
        unsafe { (self.aligned_alloc)(align, size) }
    }
    pub fn memalign(&self, align: usize, size: usize) -> *mut c_void {
        // SAFETY: no precondition.
        unsafe { (self.memalign)(align, size) }
    }
    pub fn valloc(&self, size: usize) -> *mut c_void {
        // SAFETY: no precondition.
        unsafe { (self.valloc)(size) }
    }
    pub fn pvalloc(&self, size: usize) -> *mut c_void {
        // SAFETY: no precondition.
        unsafe { (self.pvalloc)(size) }
    }
    pub fn malloc_usable_size(&self, block: *mut c_void) -> usize {
        // SAFETY: the tests pass null or a live block of this library (or, in the
        // invalid-pointer tests, a pointer whose report ends the process).
        unsafe { (self.malloc_usable_size)(block) }
    }
}

pub fn errno() -> i32 {
    // SAFETY: the calling thread's errno, always valid.
    unsafe { *libc::__errno_location() }
}

pub fn set_errno(code: i32) {
    // SAFETY: as `errno`.
    unsafe { *libc::__errno_location() = code };
}
