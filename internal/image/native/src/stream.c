// vfleet-stream: memory bandwidth by the STREAM method (J. D. McCalpin's
// benchmark): four kernels over three arrays of doubles, each array at
// least four times the last-level cache, the best of several passes
// reported per kernel in MB/s (10^6 bytes). This is vfleet's own small
// implementation, not STREAM's code: threads are POSIX threads, each
// working on its own slice, and every kernel is timed between two
// barriers by the first thread.
//
//   copy:  c = a          2 arrays touched per element
//   scale: b = s * c      2
//   add:   c = a + b      3
//   triad: a = b + s * c  3
//
// Usage: vfleet-stream [--threads N] [--seconds S] [--min-passes N]
//                      [--array-mib M] [--version]
// N = 0 (the default) is one thread per CPU the process may run on.
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 "unknown"
#endif

enum { COPY, SCALE, ADD, TRIAD, KERNELS };
static const char *kernel_names[KERNELS] = {"Copy", "Scale", "Add", "Triad"};
static const int arrays_touched[KERNELS] = {2, 2, 3, 3};
// STREAM scales by 3.0, under which the values grow fifteenfold per pass
// and overflow within a few hundred passes; with s = sqrt(2) - 1 a pass
// maps a to (2s + s^2) a = a, so any number of passes stays finite and the
// kernels' cost is the same.
static double scalar;

static double *a, *b, *c;
static size_t elements;
static int nthreads;
static pthread_barrier_t barrier;

struct slice {
	size_t from, to;
	int kernel;
};
static struct slice *slices;
static volatile int current_kernel = -1; // -1: stop

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void run_kernel(int k, size_t from, size_t to) {
	size_t i;
	switch (k) {
	case COPY:
		for (i = from; i < to; i++) c[i] = a[i];
		break;
	case SCALE:
		for (i = from; i < to; i++) b[i] = scalar * c[i];
		break;
	case ADD:
		for (i = from; i < to; i++) c[i] = a[i] + b[i];
		break;
	case TRIAD:
		for (i = from; i < to; i++) a[i] = b[i] + scalar * c[i];
		break;
	}
}

// Worker threads wait at the barrier for a kernel, run their slice of it
// and meet again; the first thread is the timer and runs its slice too.
static void *worker(void *arg) {
	struct slice *s = arg;
	for (;;) {
		pthread_barrier_wait(&barrier);
		int k = current_kernel;
		if (k < 0) return NULL;
		run_kernel(k, s->from, s->to);
		pthread_barrier_wait(&barrier);
	}
}

static double timed(int k) {
	current_kernel = k;
	double t0 = now();
	pthread_barrier_wait(&barrier);
	run_kernel(k, slices[0].from, slices[0].to);
	pthread_barrier_wait(&barrier);
	return now() - t0;
}

// first_touch initialises each slice from the thread that will use it, so
// that on a NUMA host pages land on the node that reads them.
static void *first_touch(void *arg) {
	struct slice *s = arg;
	for (size_t i = s->from; i < s->to; i++) {
		a[i] = 1.0;
		b[i] = 2.0;
		c[i] = 0.0;
	}
	return NULL;
}

// last_level_cache_bytes sums the largest cache level over the distinct
// caches of that level, as sysfs describes them; 0 if it cannot tell.
static long last_level_cache_bytes(void) {
	long total = 0;
	int best_level = 0;
	char seen[256][64];
	int nseen = 0;
	for (int cpu = 0; cpu < 4096; cpu++) {
		char path[128];
		snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cache", cpu);
		if (access(path, R_OK) != 0) {
			if (cpu > 0 && errno == ENOENT) break;
			continue;
		}
		for (int idx = 0; idx < 16; idx++) {
			char p[192], buf[64], shared[64];
			int level = 0;
			long kib = 0;
			FILE *f;
			snprintf(p, sizeof p, "%s/index%d/level", path, idx);
			if (!(f = fopen(p, "r"))) break;
			if (fscanf(f, "%d", &level) != 1) level = 0;
			fclose(f);
			snprintf(p, sizeof p, "%s/index%d/size", path, idx);
			if (!(f = fopen(p, "r"))) continue;
			if (fscanf(f, "%63s", buf) == 1) kib = strtol(buf, NULL, 10);
			fclose(f);
			snprintf(p, sizeof p, "%s/index%d/shared_cpu_list", path, idx);
			shared[0] = 0;
			if ((f = fopen(p, "r"))) {
				if (fscanf(f, "%63s", shared) != 1) shared[0] = 0;
				fclose(f);
			}
			if (level < best_level || kib <= 0) continue;
			if (level > best_level) {
				best_level = level;
				total = 0;
				nseen = 0;
			}
			int dup = 0;
			for (int i = 0; i < nseen; i++) dup |= strcmp(seen[i], shared) == 0;
			if (!dup && nseen < 256) {
				snprintf(seen[nseen++], sizeof seen[0], "%s", shared);
				total += kib * 1024;
			}
		}
	}
	return total;
}

// available_bytes is MemAvailable from /proc/meminfo; 0 if unknown.
static long available_bytes(void) {
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	long kib = 0;
	if (!f) return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %ld kB", &kib) == 1) break;
	fclose(f);
	return kib * 1024;
}

static int usage(void) {
	fprintf(stderr, "usage: vfleet-stream [--threads N] [--seconds S] [--min-passes N] [--array-mib M] [--version]\n");
	return 2;
}

int main(int argc, char **argv) {
	double seconds = 3;
	int min_passes = 3;
	long array_mib = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--version")) {
			printf("vfleet-stream source %s\n", SOURCE_SHA256);
			return 0;
		}
		if (i + 1 >= argc) return usage();
		if (!strcmp(argv[i], "--threads")) nthreads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--min-passes")) min_passes = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--array-mib")) array_mib = atol(argv[++i]);
		else return usage();
	}
	if (nthreads < 0 || seconds <= 0 || min_passes < 1 || array_mib < 0) return usage();
	scalar = sqrt(2.0) - 1.0;
	if (nthreads == 0) {
		cpu_set_t set;
		nthreads = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
	}
	long llc = last_level_cache_bytes();
	// STREAM's rule: each array at least four times the last-level cache,
	// and never so small that timing is mostly overhead.
	size_t bytes = (size_t)(array_mib > 0 ? array_mib << 20 : 4 * (llc > 0 ? llc : 32L << 20));
	// ...but the three arrays take at most half the memory available (a
	// small VM), and the output says when that broke the rule.
	long avail = available_bytes();
	int limited = 0;
	if (array_mib == 0 && avail > 0 && 3 * bytes > (size_t)avail / 2) {
		bytes = avail / 6;
		limited = 1;
	}
	if (bytes < (16UL << 20)) bytes = 16UL << 20;
	elements = bytes / sizeof(double);
	a = aligned_alloc(64, elements * sizeof(double));
	b = aligned_alloc(64, elements * sizeof(double));
	c = aligned_alloc(64, elements * sizeof(double));
	if (!a || !b || !c) {
		fprintf(stderr, "vfleet-stream: cannot allocate 3 arrays of %zu MiB\n", bytes >> 20);
		return 1;
	}
	slices = calloc(nthreads, sizeof *slices);
	pthread_t *threads = calloc(nthreads, sizeof *threads);
	for (int t = 0; t < nthreads; t++) {
		slices[t].from = elements * t / nthreads;
		slices[t].to = elements * (t + 1) / nthreads;
		pthread_create(&threads[t], NULL, first_touch, &slices[t]);
	}
	for (int t = 0; t < nthreads; t++) pthread_join(threads[t], NULL);
	pthread_barrier_init(&barrier, NULL, nthreads);
	for (int t = 1; t < nthreads; t++) pthread_create(&threads[t], NULL, worker, &slices[t]);

	double best[KERNELS], worst[KERNELS], sum[KERNELS];
	for (int k = 0; k < KERNELS; k++) best[k] = 1e30, worst[k] = 0, sum[k] = 0;
	// The first pass only warms the pages and caches up: STREAM leaves it out.
	for (int k = 0; k < KERNELS; k++) timed(k);
	int passes = 0;
	double start = now();
	while (passes < min_passes || now() - start < seconds) {
		for (int k = 0; k < KERNELS; k++) {
			double t = timed(k);
			if (t < best[k]) best[k] = t;
			if (t > worst[k]) worst[k] = t;
			sum[k] += t;
		}
		passes++;
	}
	current_kernel = -1;
	pthread_barrier_wait(&barrier);
	for (int t = 1; t < nthreads; t++) pthread_join(threads[t], NULL);

	// Each element went through warm-up plus passes rounds of the four
	// kernels; the expected values follow from the same recurrences.
	double ea = 1.0, eb = 2.0, ec = 0.0;
	for (int r = 0; r < passes + 1; r++) {
		ec = ea;
		eb = scalar * ec;
		ec = ea + eb;
		ea = eb + scalar * ec;
	}
	double worst_err = 0;
	for (size_t i = 0; i < elements; i += elements / 1024 + 1) {
		double errs[3] = {fabs(a[i] - ea) / ea, fabs(b[i] - eb) / eb, fabs(c[i] - ec) / ec};
		for (int j = 0; j < 3; j++)
			if (errs[j] > worst_err) worst_err = errs[j];
	}

	printf("vfleet-stream source %s\n", SOURCE_SHA256);
	printf("threads %d, array %zu elements (%.1f MiB each), last-level cache %ld bytes, passes %d (best of each)\n",
	       nthreads, elements, elements * sizeof(double) / 1048576.0, llc, passes);
	if (limited || (llc > 0 && elements * sizeof(double) < 4 * (size_t)llc))
		printf("note: arrays are smaller than four times the last-level cache%s\n", limited ? ": the memory available limits them" : "");
	printf("%-8s %14s %12s %12s %12s\n", "Function", "Best MB/s", "Avg time", "Min time", "Max time");
	for (int k = 0; k < KERNELS; k++) {
		double mb = arrays_touched[k] * sizeof(double) * (double)elements / 1e6;
		printf("%-8s %14.1f %12.6f %12.6f %12.6f\n", kernel_names[k], mb / best[k], sum[k] / passes, best[k], worst[k]);
	}
	if (worst_err > 1e-13) {
		printf("Validation: FAILED, relative error %.3e\n", worst_err);
		return 1;
	}
	printf("Validation: ok, relative error %.3e\n", worst_err);
	return 0;
}
