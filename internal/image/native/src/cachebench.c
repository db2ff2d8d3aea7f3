// vfleet-cachebench: cache and memory bandwidth by buffer size, in the
// manner of CacheBench (P. Mucci's, part of LLCbench): one thread passes
// over a buffer again and again, reading it, writing it, or reading,
// modifying and writing it back, for buffers from a few KiB (inside the
// first-level cache) to many MiB (in memory), and reports each size's
// rate in MB/s (10^6 bytes: the buffer's bytes once per pass, whatever the
// mode). The last line but one is the mean over the sizes of each mode,
// the figure the Phoronix Test Suite reports for CacheBench. This is
// vfleet's own small implementation, not CacheBench's code.
//
// Usage: vfleet-cachebench [--seconds S] [--min-kib N] [--max-kib N] [--version]
// Sizes double from --min-kib to --max-kib; the time is shared evenly
// between the sizes and the three modes.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 "unknown"
#endif

enum { READ, WRITE, RMW, MODES };

static uint64_t *buf;

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

// The passes work on 16-byte vectors of two words (SSE2 on x86-64, NEON
// on arm64, both always there), and a read keeps four sums apart: one
// scalar sum waits for each addition before the next, and that, not the
// cache, would set the rate. Each pass is a function of its own, and the
// barrier after it makes the compiler load and store the buffer again
// every time rather than fold repeated passes into one.
typedef uint64_t vec __attribute__((vector_size(16)));

// A buffer is a whole number of KiB, so its words come in whole steps of
// four vectors.

static __attribute__((noinline)) uint64_t read_pass(size_t n) {
	const vec *v = (const vec *)buf;
	vec s0 = {0, 0}, s1 = s0, s2 = s0, s3 = s0;
	for (size_t i = 0; i < n / 2; i += 4) {
		s0 += v[i];
		s1 += v[i + 1];
		s2 += v[i + 2];
		s3 += v[i + 3];
	}
	__asm__ volatile("" ::: "memory");
	vec s = s0 + s1 + s2 + s3;
	return s[0] + s[1];
}

static __attribute__((noinline)) void write_pass(size_t n, uint64_t w) {
	vec *v = (vec *)buf, x = {w, w};
	for (size_t i = 0; i < n / 2; i++) v[i] = x;
	__asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void rmw_pass(size_t n) {
	vec *v = (vec *)buf, one = {1, 1};
	for (size_t i = 0; i < n / 2; i++) v[i] += one;
	__asm__ volatile("" ::: "memory");
}

// What the passes leave, for the check at the end of each size: every
// read's sum, the value the last write stored and how many increments
// followed it.
struct state {
	uint64_t sum, passes_read, written, increments;
};

static void passes(int mode, size_t n, long reps, struct state *st) {
	for (long r = 0; r < reps; r++) {
		switch (mode) {
		case READ:
			st->sum += read_pass(n);
			st->passes_read++;
			break;
		case WRITE:
			write_pass(n, ++st->written);
			st->increments = 0;
			break;
		case RMW:
			rmw_pass(n);
			st->increments++;
			break;
		}
	}
}

// measure returns the mode's rate over n elements in MB/s: a warm-up
// pass, then batches of passes, doubled until one lasts a millisecond
// so that reading the clock costs nothing next to them, then such batches
// until the slice is spent.
static double measure(int mode, size_t n, double slice, struct state *st) {
	double end = now() + slice;
	long reps = 1;
	passes(mode, n, 1, st);
	for (;;) {
		double t0 = now();
		passes(mode, n, reps, st);
		if (now() - t0 >= 1e-3 || now() >= end) break;
		reps *= 2;
	}
	long done = 0;
	double busy = 0;
	do {
		double t0 = now();
		passes(mode, n, reps, st);
		busy += now() - t0;
		done += reps;
	} while (now() < end);
	return (double)done * n * sizeof(uint64_t) / busy / 1e6;
}

static int usage(void) {
	fprintf(stderr, "usage: vfleet-cachebench [--seconds S] [--min-kib N] [--max-kib N] [--version]\n");
	return 2;
}

int main(int argc, char **argv) {
	double seconds = 3;
	long min_kib = 4, max_kib = 65536;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--version")) {
			printf("vfleet-cachebench source %s\n", SOURCE_SHA256);
			return 0;
		}
		if (i + 1 >= argc) return usage();
		if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--min-kib")) min_kib = atol(argv[++i]);
		else if (!strcmp(argv[i], "--max-kib")) max_kib = atol(argv[++i]);
		else return usage();
	}
	if (seconds <= 0 || min_kib < 1 || max_kib < min_kib || max_kib > (1L << 22)) return usage();
	int sizes = 0;
	for (long kib = min_kib; kib <= max_kib; kib *= 2) sizes++;
	double slice = seconds / (sizes * MODES);
	buf = aligned_alloc(64, (size_t)max_kib << 10);
	if (!buf) {
		fprintf(stderr, "vfleet-cachebench: cannot allocate %ld KiB\n", max_kib);
		return 1;
	}

	printf("vfleet-cachebench source %s\n", SOURCE_SHA256);
	printf("sizes %ld to %ld KiB, %d sizes, %.3f s per size and mode, %zu-byte elements\n", min_kib, min_kib << (sizes - 1),
	       sizes, slice, sizeof(uint64_t));
	printf("%-12s %14s %14s %14s\n", "Size(bytes)", "Read MB/s", "Write MB/s", "RMW MB/s");
	double mean[MODES] = {0};
	for (long kib = min_kib; kib <= max_kib; kib *= 2) {
		size_t n = ((size_t)kib << 10) / sizeof(uint64_t);
		struct state st = {0};
		for (size_t i = 0; i < n; i++) buf[i] = 1;
		double rate[MODES];
		for (int m = 0; m < MODES; m++) {
			rate[m] = measure(m, n, slice, &st);
			mean[m] += rate[m] / sizes;
		}
		// Every read summed ones; the last write stored its own number
		// and each read/modify/write pass added one to it.
		uint64_t want = st.written + st.increments;
		size_t bad = st.sum != st.passes_read * n ? n : 0;
		for (size_t i = 0; i < n && !bad; i++)
			if (buf[i] != want) bad = i + 1;
		if (bad) {
			printf("Validation: FAILED at %ld KiB\n", kib);
			return 1;
		}
		printf("%-12zu %14.1f %14.1f %14.1f\n", (size_t)kib << 10, rate[READ], rate[WRITE], rate[RMW]);
	}
	printf("%-12s %14.1f %14.1f %14.1f\n", "Mean", mean[READ], mean[WRITE], mean[RMW]);
	printf("Validation: ok\n");
	return 0;
}
