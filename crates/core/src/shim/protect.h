// How the shim's C entry points report C++ exceptions: a malloc'ed message in `*err` (freed by
// the Rust side), because an exception crossing `extern "C"` into Rust aborts the process. Every
// exception is caught, not only std::exception's.
#pragma once

#include <cstring>
#include <exception>
#include <string>

static inline char* copy_string(const std::string& s) { return strdup(s.c_str()); }

#define TN_PROTECT(err, body)                         \
  try {                                               \
    body                                              \
  } catch (const std::exception& e) {                 \
    if (err) *err = copy_string(e.what());            \
  } catch (...) {                                     \
    if (err) *err = copy_string("unknown C++ error"); \
  }
