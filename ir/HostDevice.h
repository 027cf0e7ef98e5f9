//===- HostDevice.h - Mark functions callable from host and device --------===//
//
// Element math is written once and compiled both by the host compiler and by
// nvcc. AMPC_HD expands to __host__ __device__ under nvcc and to nothing else.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_IR_HOSTDEVICE_H
#define AMPC_IR_HOSTDEVICE_H

#if defined(__CUDACC__)
#define AMPC_HD __host__ __device__
#else
#define AMPC_HD
#endif

#endif
