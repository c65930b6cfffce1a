# Helpers shared by normtune's targets.

# Compile options for normtune's own code (warnings, HIP offload flags).
function(normtune_target_defaults target)
  set(_cxx_warn -Wall -Wextra)
  if(NORMTUNE_WARNINGS_AS_ERRORS)
    list(APPEND _cxx_warn -Werror)
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${_cxx_warn}>)
  if(NORMTUNE_ENABLE_CUDA)
    set(_cuda_flags --expt-relaxed-constexpr -Xcompiler=-Wall)
    if(NORMTUNE_WARNINGS_AS_ERRORS)
      list(APPEND _cuda_flags -Werror=all-warnings)
    endif()
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${_cuda_flags}>)
  elseif(NORMTUNE_ENABLE_EMU)
    # (NORMTUNE_USE_EMU and the emulator's flags come with the runtime target, normtune_emu)
    target_link_libraries(${target} PUBLIC normtune_emu)
  else()
    target_compile_definitions(${target} PUBLIC NORMTUNE_USE_HIP=1)
    # hipcc compiles every C++ file for the device too: name the targets (it would otherwise
    # probe for a GPU to find them).
    foreach(arch IN LISTS NORMTUNE_HIP_ARCHS)
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:--offload-arch=${arch}>)
      target_link_options(${target} PRIVATE --offload-arch=${arch})
    endforeach()
  endif()
endfunction()

# Add GPU sources (.cu) to a target. Under HIP they are compiled by hipcc as HIP C++.
function(normtune_gpu_sources target)
  if(NORMTUNE_ENABLE_HIP)
    set(_offload "")
    foreach(arch IN LISTS NORMTUNE_HIP_ARCHS)
      list(APPEND _offload --offload-arch=${arch})
    endforeach()
    set_source_files_properties(${ARGN} TARGET_DIRECTORY ${target} PROPERTIES LANGUAGE CXX
      COMPILE_OPTIONS "-x;hip;${_offload}")
    target_link_options(${target} PRIVATE ${_offload})
  elseif(NORMTUNE_ENABLE_EMU)
    # Kernels are host C++ for the emulator.
    set_source_files_properties(${ARGN} TARGET_DIRECTORY ${target} PROPERTIES LANGUAGE CXX
      COMPILE_OPTIONS "-xc++")
  endif()
  target_sources(${target} PRIVATE ${ARGN})
endfunction()
