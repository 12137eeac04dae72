# Third-party dependencies, all from the operating system's packages.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(simdjson REQUIRED)
find_package(CURL REQUIRED)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)

# The CUDA evaluation backend (lib/eval/cuda), chosen by KS_WITH_CUDA. CUDA is
# loaded at run time (dlopen); only the toolkit's headers are needed to build,
# for the driver and NVRTC type declarations. Left unset, the option is ON
# where those headers are found; an explicit ON without them is an error, and
# OFF builds without the toolkit: every CUDA request then fails with
# KS_E_NO_DEVICE, saying the build has no CUDA backend, and the host paths
# work as usual.
set(_ks_cuda_found OFF)
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND)
  set(_ks_cuda_found ON)
  set(_ks_cuda_include_dirs ${CUDAToolkit_INCLUDE_DIRS})
  set(_ks_cuda_root "${CUDAToolkit_LIBRARY_ROOT}")
  if(NOT _ks_cuda_root)
    get_filename_component(_ks_cuda_root "${CUDAToolkit_BIN_DIR}" DIRECTORY)
  endif()
else()
  find_path(KS_CUDA_HEADER_DIR cuda.h PATHS /usr/local/cuda/include ENV CUDA_HOME PATH_SUFFIXES include)
  if(KS_CUDA_HEADER_DIR)
    set(_ks_cuda_found ON)
    set(_ks_cuda_include_dirs ${KS_CUDA_HEADER_DIR})
    get_filename_component(_ks_cuda_root "${KS_CUDA_HEADER_DIR}" DIRECTORY)
  endif()
endif()
option(KS_WITH_CUDA "ksearch: the CUDA evaluation backend (needs the CUDA Toolkit's headers)" ${_ks_cuda_found})
if(KS_WITH_CUDA)
  if(NOT _ks_cuda_found)
    message(FATAL_ERROR "ksearch: KS_WITH_CUDA is ON but the CUDA Toolkit headers (cuda.h, nvrtc.h) were not "
                        "found; set CUDAToolkit_ROOT (or CUDA_HOME) to the toolkit, or configure with "
                        "-DKS_WITH_CUDA=OFF to build without the CUDA backend")
  endif()
  set(KS_CUDA_INCLUDE_DIRS ${_ks_cuda_include_dirs})
  set(KS_CUDA_ROOT "${_ks_cuda_root}")
  set(KS_HAVE_CUDA_BACKEND 1)
  message(STATUS "ksearch: CUDA backend on; headers in ${KS_CUDA_INCLUDE_DIRS} (toolkit root ${KS_CUDA_ROOT})")
else()
  set(KS_CUDA_INCLUDE_DIRS "")
  set(KS_CUDA_ROOT "")
  set(KS_HAVE_CUDA_BACKEND 0)
  if(_ks_cuda_found)
    message(STATUS "ksearch: CUDA backend off (KS_WITH_CUDA=OFF)")
  else()
    message(STATUS "ksearch: CUDA backend off: no CUDA Toolkit headers found (set CUDAToolkit_ROOT to build it)")
  endif()
endif()
