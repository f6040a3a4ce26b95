# Per-target build options: warnings and sanitizers.

# TB_WERROR: warnings in our own targets fail the build (on in .ci/dev test's CTest build).
# Third-party headers (Eigen, oneDNN, GoogleTest, Google Benchmark, pybind11, the XLA FFI API)
# come in as SYSTEM includes (imported targets, or SYSTEM), so only our code is held to it.
option(TB_WERROR "Treat compiler warnings in tensorbridge's own targets as errors" OFF)

function(tb_target_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    # __FILE__ relative to the source tree: registration debug strings and error messages
    # read "kernels/binary.cc:50", and builds from different checkouts share the ccache.
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter
      "-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=")
    if(TB_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()

# TB_SANITIZE=ON or address: AddressSanitizer + UndefinedBehaviorSanitizer (leak checking
# comes with ASan on Linux). TB_SANITIZE=thread: ThreadSanitizer. Only our own code is
# instrumented: oneDNN and the system libgomp are not, so TSan runs want OMP_NUM_THREADS=1
# (a libgomp team's synchronisation is invisible to it and would read as races).
function(tb_target_sanitizers target)
  if(TB_SANITIZE STREQUAL "thread")
    target_compile_options(${target} PRIVATE -fsanitize=thread -fno-omit-frame-pointer)
    target_link_options(${target} PUBLIC -fsanitize=thread)
  elseif(TB_SANITIZE)
    target_compile_options(${target} PRIVATE
      -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
    target_link_options(${target} PUBLIC -fsanitize=address,undefined)
  endif()
endfunction()
