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

# The hot code of the core library laid out together (Release builds with GCC or Clang, no
# sanitizers). Every function gets a section of its own (-ffunction-sections) and, where GNU
# gold is installed, the link puts the sections named in ORDER_FILE (python/tools/
# gen_code_layout.py writes it from a run of the model zoo) first, in that order. The kernel
# maps an executed page of a shared library together with its neighbours (fault-around, 64 KB):
# with the executed functions spread over the whole .text, most of it would become resident in
# every process; packed together they take a few such windows. Without gold the link is the
# default one, in source order.
option(TB_CODE_LAYOUT "Hot functions of the core library first in .text (GNU gold)" ON)

function(tb_target_code_layout target order_file)
  if(NOT TB_CODE_LAYOUT OR TB_SANITIZE OR NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    return()
  endif()
  target_compile_options(${target} PRIVATE -ffunction-sections)
  find_program(TB_LD_GOLD ld.gold)
  if(TB_LD_GOLD AND EXISTS "${order_file}")
    target_link_options(${target} PRIVATE -fuse-ld=gold
      "LINKER:--section-ordering-file,${order_file}")
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${order_file}")
  endif()
endfunction()
