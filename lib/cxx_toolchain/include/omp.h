/* OpenMP as seen by a kernel built without an OpenMP runtime: one thread (see ../zig-clang++). */
#pragma once
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_num_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_in_parallel(void) { return 0; }
