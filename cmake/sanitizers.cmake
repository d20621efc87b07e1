# ThreadSanitizer build (ACTMEM_TSAN), for tests/thread_safety_test.cpp: adds
# -fsanitize=thread to actmem_build_flags, which every actmem target links.
# Exclusive with ACTMEM_SANITIZE (AddressSanitizer cannot share a process
# with ThreadSanitizer). The Python module is not built under it: a TSan
# library cannot be loaded into an uninstrumented interpreter.
include_guard(GLOBAL)

if(ACTMEM_TSAN)
  if(ACTMEM_SANITIZE)
    message(FATAL_ERROR "ACTMEM_TSAN and ACTMEM_SANITIZE cannot be combined; build them in separate build folders")
  endif()
  target_compile_options(actmem_build_flags INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(actmem_build_flags INTERFACE -fsanitize=thread)
endif()
