/* SPDX-License-Identifier: MIT */
/*
 * wl.h - what the files of memkit-bench-malloc share: the workload entry
 * type, the parameters, the result, a seeded random generator and the
 * object stamp that checks an allocator did not hand out the same memory
 * twice.
 *
 * memkit-bench-malloc is the program memkit-bench runs once per figure
 * under each drop-in allocator (glibc's malloc as it is, or another one
 * through LD_PRELOAD).  It is linked against the C library only - never
 * against memkit - so every malloc/free in it goes through the dynamic
 * symbol that LD_PRELOAD replaces, and all allocators run the same
 * machine code.  A workload does its untimed set-up, times its phase with
 * the monotonic clock, and fills a wl_result; main.c prints it.
 *
 * Determinism: every random choice comes from wl_rng seeded by the
 * parameters (and the thread index), never by the time, so each allocator
 * gets the same sequence of requests; every object is read back once, by
 * whichever thread frees it, into a checksum that is therefore the same for
 * every allocator (memkit-bench compares them).  The stamp written at both
 * ends of an object is checked when it is freed: a mismatch means that two
 * live objects overlapped or that freed memory was written over, and is
 * counted in wl_result.bad (the figure is then reported as failed).
 */
#ifndef BENCH_MALLOC_WL_H
#define BENCH_MALLOC_WL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../timing.h"

/* The parameters a workload may read (main.c parses key=value arguments;
 * unset ones keep the workload's defaults). */
typedef struct wl_params {
    uint64_t size;    /* w2m: object size; w1m: chunk size */
    uint64_t ring;    /* w2m: objects live in a ring (0: none); w3: churn bytes */
    uint64_t live;    /* w1m: live bytes; w6: live objects per thread; w3: peak bytes */
    uint64_t ops;     /* operations timed (whole run, all threads) */
    uint64_t threads; /* w6: threads */
    uint64_t seed;
    uint64_t quiet_ms; /* w3: the quiet phase after the churn */
    uint64_t trace;    /* w3: print the RSS samples on stderr */
} wl_params;

typedef struct wl_result {
    uint64_t ns;    /* the timed phase */
    uint64_t ops;   /* operations in it (mallocs, each with its free) */
    uint64_t check; /* checksum of the data read back */
    uint64_t bad;   /* objects whose stamp was wrong when freed */
    const char *error; /* non-NULL: the workload failed (malloc NULL, ...) */
    const char *extra; /* NULL, or more " key=value" figures for the line */
} wl_result;

typedef void (*wl_fn)(const wl_params *p, wl_result *r);

void wl_w2m(const wl_params *p, wl_result *r);      /* single.c */
void wl_w1m(const wl_params *p, wl_result *r);      /* single.c */
void wl_w8(const wl_params *p, wl_result *r);       /* large.c */
void wl_w3(const wl_params *p, wl_result *r);       /* peak.c */
void wl_larson(const wl_params *p, wl_result *r);   /* larson.c */
void wl_prodcons(const wl_params *p, wl_result *r); /* prodcons.c */
void wl_churn(const wl_params *p, wl_result *r);    /* churn.c */

/* `run PROGRAM ARGS...`: run another program and print the workload line
 * about it; returns the exit status (run.c). */
int wl_run(char **argv);

/* ---- seeded random numbers (xorshift64*) -------------------------------- */

static inline uint64_t wl_rng_seed(uint64_t seed, uint64_t stream)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15u + stream * 0xD1B54A32D192ED03u + 1;
    return s ? s : 1;
}

static inline uint64_t wl_rng(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Du;
}

/* A size for W6: uniform in [16, 1024]. */
static inline size_t wl_small_size(uint64_t *s)
{
    return 16 + (size_t)(wl_rng(s) % 1009);
}

/* A hint to the CPU inside a spin loop. */
static inline void wl_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* ---- object stamps ------------------------------------------------------- */

/* Write @v into the first and the last 8 bytes of object @o (size >= 16;
 * memcpy, because the end of an object is not 8-byte aligned). */
static inline void wl_stamp(void *o, size_t size, uint64_t v)
{
    memcpy(o, &v, 8);
    uint64_t w = ~v;
    memcpy((char *)o + size - 8, &w, 8);
}

/* Read the stamp back: add it to *check, count a bad object in *bad. */
static inline void wl_unstamp(const void *o, size_t size, uint64_t *check, uint64_t *bad)
{
    uint64_t v, w;
    memcpy(&v, o, 8);
    memcpy(&w, (const char *)o + size - 8, 8);
    *check += v;
    *bad += w != ~v;
}

#endif /* BENCH_MALLOC_WL_H */
