# Initial cache for test_cuda_option_*: the CUDA Toolkit as the find calls
# would see it on a machine without one (tests/install/CMakeLists.txt).
set(CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit ON CACHE BOOL "")
set(CMAKE_IGNORE_PATH "/usr/local/cuda/include;/usr/local/include" CACHE STRING "")
