# Per-target build options: warnings and sanitizers.

function(tb_target_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    # __FILE__ relative to the source tree: registration debug strings and error messages
    # read "kernels/binary.cc:50", and builds from different checkouts share the ccache.
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter
      "-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=")
  endif()
endfunction()

# AddressSanitizer + UndefinedBehaviorSanitizer (leak checking comes with ASan on Linux).
function(tb_target_sanitizers target)
  if(TB_SANITIZE)
    target_compile_options(${target} PRIVATE
      -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
    target_link_options(${target} PUBLIC -fsanitize=address,undefined)
  endif()
endfunction()
