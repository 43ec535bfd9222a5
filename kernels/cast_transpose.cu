// Cast-transpose: x[M][N] (fp32/fp16/bf16) -> rowwise y[M][N] and columnwise yT[N][M] FP8,
// both scaled by *scale; amax(|x|) reduced into *amax with one atomic per block; block 0
// writes *scale_inv = 1 / *scale.
//
// Compiled by NVRTC once per (arch, variant, config, dtypes). Macros:
//   ITYPE 0=fp32 1=fp16 2=bf16; OFMT 0=E4M3 1=E5M2; LOAD_BYTES, STORE_BYTES vector widths;
//   TILE_M x TILE_N block tile; NTHREADS threads per block; VARIANT_<NAME> fence placement or
//   planted bug (exactly one).
//
// Host contract (checked in tracer/launch.py): N % (LOAD_BYTES / sizeof(in)) == 0,
// N % STORE_BYTES == 0, M % STORE_BYTES == 0, 16-byte aligned pointers. Vectors are then either
// fully inside or fully outside the matrix, so edge tiles are bounds-checked per vector.

#if ITYPE == 0
typedef unsigned int in_bits_t;
#define IN_BYTES 4
#else
typedef unsigned short in_bits_t;
#define IN_BYTES 2
#endif

#define LV (LOAD_BYTES / IN_BYTES)  // input elements per load vector
#define SV STORE_BYTES              // fp8 elements per store vector
#define TC_PITCH (TILE_M + 4)       // padded row pitch of the transposed tile

template <int N> struct VecT;
template <> struct VecT<1> { typedef unsigned char T; };
template <> struct VecT<2> { typedef unsigned short T; };
template <> struct VecT<4> { typedef unsigned int T; };
template <> struct VecT<8> { typedef uint2 T; };
template <> struct VecT<16> { typedef uint4 T; };

template <int N> union Vec {
  typename VecT<N>::T v;
  unsigned char b[N];
  in_bits_t e[N / IN_BYTES > 0 ? N / IN_BYTES : 1];
};

__device__ __forceinline__ float to_float(in_bits_t bits) {
#if ITYPE == 0
  return __uint_as_float(bits);
#elif ITYPE == 1
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
  return f;
#else
  return __uint_as_float(((unsigned int)bits) << 16);
#endif
}

// Round to nearest even, saturate to the largest finite value, NaN stays NaN. Two values per
// instruction: lo goes to the low byte.
__device__ __forceinline__ unsigned short to_fp8x2(float lo, float hi) {
  unsigned short pair;
#if OFMT == 0
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(hi), "f"(lo));
#endif
  return pair;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

template <int NLOADS>
__device__ __forceinline__ void load_tile(Vec<LOAD_BYTES> (&v)[NLOADS], const unsigned char* __restrict__ in,
                                          int m0, int n0, int M, int N) {
  constexpr int VPR = TILE_N / LV;
#pragma unroll
  for (int k = 0; k < NLOADS; ++k) {
    const int i = threadIdx.x + k * NTHREADS;
    const int r = i / VPR, c = (i % VPR) * LV;
    if (m0 + r < M && n0 + c < N)
      v[k].v = *reinterpret_cast<const typename VecT<LOAD_BYTES>::T*>(
          in + ((size_t)(m0 + r) * N + n0 + c) * IN_BYTES);
    else
      v[k].v = typename VecT<LOAD_BYTES>::T();
  }
}

// Persistent blocks: each walks tiles blockIdx.x, blockIdx.x + gridDim.x, ... and loads the next
// tile into registers while the current one is stored, so loads and stores overlap.
extern "C" __global__ void __launch_bounds__(NTHREADS)
cast_transpose(const unsigned char* __restrict__ in, unsigned char* __restrict__ out_row,
               unsigned char* __restrict__ out_col, const float* __restrict__ scale_ptr,
               float* __restrict__ scale_inv_ptr, float* __restrict__ amax_ptr, int M, int N) {
  __shared__ __align__(16) unsigned char tr[TILE_M][TILE_N];
  __shared__ unsigned char tc[TILE_N][TC_PITCH];
  __shared__ float warp_amax[NTHREADS / 32];

  const int tiles_n = (N + TILE_N - 1) / TILE_N;
  const int tiles = ((M + TILE_M - 1) / TILE_M) * tiles_n;
#if defined(VARIANT_PLANTED_UNINIT)
  const float scale = scale_ptr[1];
#else
  const float scale = scale_ptr[0];
#endif
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale_inv_ptr = 1.0f / scale;

  constexpr int VPR = TILE_N / LV;
  constexpr int LOADS = TILE_M * VPR / NTHREADS;
  Vec<LOAD_BYTES> v[LOADS];
  float amax = 0.0f;
  int tile = blockIdx.x;
  if (tile < tiles) load_tile(v, in, (tile / tiles_n) * TILE_M, (tile % tiles_n) * TILE_N, M, N);

  for (; tile < tiles; tile += gridDim.x) {
    const int m0 = (tile / tiles_n) * TILE_M;
    const int n0 = (tile % tiles_n) * TILE_N;
    // Phase 1: amax, cast (two values per instruction), scatter into both shared tiles.
#pragma unroll
    for (int k = 0; k < LOADS; ++k) {
      const int i = threadIdx.x + k * NTHREADS;
      const int r = i / VPR, c = (i % VPR) * LV;
      Vec<LV> q;
#pragma unroll
      for (int j = 0; j < LV; j += 2) {
        const float x0 = to_float(v[k].e[j]);
        const float x1 = j + 1 < LV ? to_float(v[k].e[j + 1]) : 0.0f;
        amax = fmaxf(amax, fmaxf(fabsf(x0), fabsf(x1)));
        const unsigned short pair = to_fp8x2(x0 * scale, x1 * scale);
        q.b[j] = (unsigned char)(pair & 0xff);
        tc[c + j][r] = q.b[j];
        if (j + 1 < LV) {
          q.b[j + 1] = (unsigned char)(pair >> 8);
          tc[c + j + 1][r] = q.b[j + 1];
        }
      }
      *reinterpret_cast<typename VecT<LV>::T*>(&tr[r][c]) = q.v;
    }
    const int next = tile + gridDim.x;
    if (next < tiles) load_tile(v, in, (next / tiles_n) * TILE_M, (next % tiles_n) * TILE_N, M, N);

#if !defined(VARIANT_PLANTED_RACE)
    __syncthreads();
#endif

    // Phase 2: rowwise stores from tr, columnwise stores gathered from tc.
    constexpr int RPR = TILE_N / SV;
#pragma unroll
    for (int k = 0; k < TILE_M * RPR / NTHREADS; ++k) {
      const int i = threadIdx.x + k * NTHREADS;
      const int r = i / RPR, c = (i % RPR) * SV;
      if (m0 + r < M && n0 + c < N)
        *reinterpret_cast<typename VecT<SV>::T*>(out_row + (size_t)(m0 + r) * N + n0 + c) =
            *reinterpret_cast<const typename VecT<SV>::T*>(&tr[r][c]);
    }
    constexpr int CPR = TILE_M / SV;
#pragma unroll
    for (int k = 0; k < TILE_N * CPR / NTHREADS; ++k) {
      const int i = threadIdx.x + k * NTHREADS;
      const int c = i / CPR, r = (i % CPR) * SV;
      if (n0 + c < N && m0 + r < M) {
        Vec<SV> o;
#pragma unroll
        for (int j = 0; j < SV; ++j) o.b[j] = tc[c][r + j];
        *reinterpret_cast<typename VecT<SV>::T*>(out_col + (size_t)(n0 + c) * M + m0 + r) = o.v;
      }
    }
    __syncthreads();  // the next tile overwrites both shared tiles
  }

#if defined(VARIANT_PLANTED_OOB)
  if (blockIdx.x == 0 && threadIdx.x == 0) out_row[(size_t)1 << 40] = 0x7f;
#endif

#if defined(VARIANT_DEVICE_BEFORE_ATOMIC)
  __threadfence();
#elif defined(VARIANT_BLOCK_BEFORE_ATOMIC)
  __threadfence_block();
#elif defined(VARIANT_SYSTEM_BEFORE_ATOMIC)
  __threadfence_system();
#elif defined(VARIANT_DEVICE_THREAD0_ONLY)
  if (threadIdx.x == 0) __threadfence();
#endif

  // Block amax: warp shuffle, then shared memory, then one atomic per block on the bit pattern
  // (ordering of non-negative floats equals ordering of their int bits).
  amax = warp_max(amax);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#if defined(VARIANT_PLANTED_BARRIER)
  __syncwarp(0x0000ffffu);
#endif
  if (lane == 0) warp_amax[warp] = amax;
  __syncthreads();
  if (threadIdx.x == 0) {
    float b = warp_amax[0];
#pragma unroll
    for (int w = 1; w < NTHREADS / 32; ++w) b = fmaxf(b, warp_amax[w]);
#if defined(VARIANT_SYSTEM_SCOPE_ATOMIC)
    atomicMax_system(reinterpret_cast<int*>(amax_ptr), __float_as_int(b));
#else
    atomicMax(reinterpret_cast<int*>(amax_ptr), __float_as_int(b));
#endif
#if defined(VARIANT_DEVICE_AFTER_ATOMIC)
    __threadfence();
#endif
  }
#if defined(VARIANT_DEVICE_BEFORE_RETURN)
  __threadfence();
#endif
}
