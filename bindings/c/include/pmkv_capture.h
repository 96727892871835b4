/*
 * pmkv_capture.h: included into every file that pmkv-cc / pmkv-c++ compile (`-include`);
 * not for direct use.
 *
 * Code compiled for compiler capture registers its module (the program or shared library
 * it is linked into) with libpmkv when it is loaded, with the capture ABI it was built
 * for. pmkv_mg_open with capture = PMKV_MG_CAPTURE_COMPILER refuses an application whose
 * process_request lies in a module that did not register (built with a plain cc or c++,
 * whose writes to the region would not be captured and would be lost at the next open),
 * or that registered with another release's ABI.
 */
#ifndef PMKV_CAPTURE_H
#define PMKV_CAPTURE_H

/* Which hooks the instrumentation calls and what they mean; libpmkv refuses another. */
#define PMKV_CAPTURE_ABI 1u

#ifdef __cplusplus
extern "C" {
#endif
int pmkv_capture_register(unsigned abi, const void *code);
#ifdef __cplusplus
}
#endif

/* An object of this file: its address names the module the file is linked into (an
 * object's, not a function's, so that no function pointer is converted to `void *`,
 * which -Wpedantic refuses in C). */
static const char pmkv_capture_unit = 0;

__attribute__((constructor, used, no_sanitize("thread"))) static void pmkv_capture_register_unit(void) {
    (void)pmkv_capture_register(PMKV_CAPTURE_ABI, &pmkv_capture_unit);
}

#endif /* PMKV_CAPTURE_H */
