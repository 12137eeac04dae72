# Third-party dependencies, all from the operating system's packages.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(simdjson REQUIRED)
find_package(CURL REQUIRED)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)

# CUDA is loaded at run time (dlopen); only the toolkit's headers are needed to
# build, for the driver and NVRTC type declarations.
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND)
  set(KS_CUDA_INCLUDE_DIRS ${CUDAToolkit_INCLUDE_DIRS})
  set(KS_CUDA_ROOT "${CUDAToolkit_LIBRARY_ROOT}")
  if(NOT KS_CUDA_ROOT)
    get_filename_component(KS_CUDA_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
  endif()
else()
  find_path(KS_CUDA_INCLUDE_DIRS cuda.h PATHS /usr/local/cuda/include ENV CUDA_HOME PATH_SUFFIXES include)
  if(NOT KS_CUDA_INCLUDE_DIRS)
    message(FATAL_ERROR "ksearch needs the CUDA Toolkit headers (cuda.h, nvrtc.h); set CUDAToolkit_ROOT")
  endif()
  get_filename_component(KS_CUDA_ROOT "${KS_CUDA_INCLUDE_DIRS}" DIRECTORY)
endif()
message(STATUS "ksearch: CUDA headers in ${KS_CUDA_INCLUDE_DIRS} (toolkit root ${KS_CUDA_ROOT})")
