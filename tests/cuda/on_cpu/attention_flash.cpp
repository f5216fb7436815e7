// The CPU build of src/kernels/cuda/attention_flash.cu (see include/cuda_runtime.h).
#include "kernels/cuda/attention_flash.cu"
