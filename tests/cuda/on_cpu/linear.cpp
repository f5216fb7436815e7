// The CPU build of src/kernels/cuda/linear.cu (see include/cuda_runtime.h).
#include "kernels/cuda/linear.cu"
