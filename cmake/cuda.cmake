# The CUDA backend (src/kernels/cuda/): STEPMIX_CUDA = AUTO | ON | OFF.
#   AUTO (default)  built when nvcc and the toolkit's cuBLASLt are found
#   ON              the same, but a missing toolkit is a configure error
#   OFF             never; the stub (src/kernels/cuda/stub/) answers every
#                   entry point with "built without CUDA"
# Sets STEPMIX_CUDA_ENABLED. Only the .cu files are compiled by nvcc, for
# Hopper (sm_90a machine code) plus compute_90 PTX that newer GPUs can
# compile at load time; everything else stays with the C++ compiler and its
# flags (the asan preset's sanitizer flags are CMAKE_CXX_FLAGS and never reach
# nvcc). The CUDA runtime is linked statically and cuBLASLt is opened at its
# first use (src/kernels/cuda/CMakeLists.txt), so programs start without them.
set(STEPMIX_CUDA AUTO CACHE STRING "CUDA backend: AUTO (when the toolkit is found), ON or OFF")
set_property(CACHE STEPMIX_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${STEPMIX_CUDA}" stepmix_cuda_mode)
if(NOT stepmix_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "STEPMIX_CUDA must be AUTO, ON or OFF, got '${STEPMIX_CUDA}'")
endif()

set(STEPMIX_CUDA_ENABLED OFF)
set(stepmix_cuda_missing "")
if(NOT stepmix_cuda_mode STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "90a-real;90-virtual")
    endif()
    if(NOT DEFINED CMAKE_CUDA_RUNTIME_LIBRARY)
      set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
    endif()
    enable_language(CUDA)
    # The .cu files are C++20 like the rest (CUDA_STANDARD follows
    # CXX_STANDARD); CMake 3.25 knows nvcc's flags only up to C++17, nvcc 12+
    # takes -std=c++20.
    # nvcc's host compiler searches the C++ compiler's system directories
    # itself; passing /usr/include again (the json package's include
    # directory) as -isystem breaks its #include_next of <math.h>.
    list(APPEND CMAKE_CUDA_IMPLICIT_INCLUDE_DIRECTORIES ${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES})
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND AND TARGET CUDA::cublasLt AND TARGET CUDA::cudart_static)
      set(STEPMIX_CUDA_ENABLED ON)
    else()
      set(stepmix_cuda_missing "the CUDA toolkit's cudart/cuBLASLt libraries")
    endif()
  else()
    set(stepmix_cuda_missing "a CUDA compiler (nvcc on PATH, or CUDACXX)")
  endif()
  if(stepmix_cuda_missing AND stepmix_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "STEPMIX_CUDA=ON, but ${stepmix_cuda_missing} not found")
  endif()
endif()

if(STEPMIX_CUDA_ENABLED)
  message(STATUS "stepmix: CUDA backend ON (CUDA ${CUDAToolkit_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
elseif(stepmix_cuda_mode STREQUAL "OFF")
  message(STATUS "stepmix: CUDA backend OFF (STEPMIX_CUDA=OFF): built without CUDA")
else()
  message(STATUS "stepmix: CUDA backend OFF (${stepmix_cuda_missing} not found): built without CUDA")
endif()
