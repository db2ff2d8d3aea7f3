// vfleet-pingpong: the cost of a context switch between two processes that
// wake each other through a pair of pipes, each pinned to a CPU, so that
// the figure means one thing: both on one CPU (placement same: a direct
// switch, no wake-up of another CPU) or on two (split: a cross-CPU wake-up
// each way). Left to the scheduler, a pair on a small host lands on one or
// two CPUs by chance, and the rate swings by a factor between runs.
//
// The CPUs are the first one or two the process may run on (a container's
// cpuset, a VM's vCPUs).
//
// Usage: vfleet-pingpong [--placement same|split] [--seconds S] [--version]
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 "unknown"
#endif

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int pin(int cpu) {
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof set, &set);
}

static int usage(void) {
	fprintf(stderr, "usage: vfleet-pingpong [--placement same|split] [--seconds S] [--version]\n");
	return 2;
}

int main(int argc, char **argv) {
	const char *placement = "same";
	double seconds = 3;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--version")) {
			printf("vfleet-pingpong source %s\n", SOURCE_SHA256);
			return 0;
		}
		if (i + 1 >= argc) return usage();
		if (!strcmp(argv[i], "--placement")) placement = argv[++i];
		else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[++i]);
		else return usage();
	}
	int split = !strcmp(placement, "split");
	if ((!split && strcmp(placement, "same")) || seconds <= 0) return usage();

	cpu_set_t allowed;
	if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
		perror("vfleet-pingpong: sched_getaffinity");
		return 1;
	}
	int cpus[2] = {-1, -1}, found = 0;
	for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; cpu++)
		if (CPU_ISSET(cpu, &allowed)) cpus[found++] = cpu;
	if (split && found < 2) {
		fprintf(stderr, "vfleet-pingpong: placement split needs two CPUs; this process may run on CPU %d only\n", cpus[0]);
		return 1;
	}
	if (!split) cpus[1] = cpus[0];

	int to_child[2], to_parent[2];
	if (pipe(to_child) || pipe(to_parent)) {
		perror("vfleet-pingpong: pipe");
		return 1;
	}
	pid_t child = fork();
	if (child < 0) {
		perror("vfleet-pingpong: fork");
		return 1;
	}
	char byte = 0;
	if (child == 0) {
		// Only the parent's closing of its end may end the child's reads.
		close(to_child[1]);
		close(to_parent[0]);
		if (pin(cpus[1]) != 0) _exit(1);
		// Echo every byte back until the parent closes its end.
		while (read(to_child[0], &byte, 1) == 1)
			if (write(to_parent[1], &byte, 1) != 1) _exit(1);
		_exit(0);
	}
	close(to_child[0]);
	close(to_parent[1]);
	if (pin(cpus[0]) != 0) {
		perror("vfleet-pingpong: sched_setaffinity");
		kill(child, SIGKILL);
		return 1;
	}
	// A first exchange, untimed, puts the child in place on its CPU.
	if (write(to_child[1], &byte, 1) != 1 || read(to_parent[0], &byte, 1) != 1) {
		perror("vfleet-pingpong: first exchange");
		kill(child, SIGKILL);
		return 1;
	}
	long trips = 0;
	double start = now(), elapsed = 0;
	while (elapsed < seconds) {
		// Time is read every 256 round trips: often enough to stop on time,
		// rarely enough not to weigh on the figure.
		for (int i = 0; i < 256; i++) {
			if (write(to_child[1], &byte, 1) != 1 || read(to_parent[0], &byte, 1) != 1) {
				perror("vfleet-pingpong: exchange");
				kill(child, SIGKILL);
				return 1;
			}
		}
		trips += 256;
		elapsed = now() - start;
	}
	close(to_child[1]);
	waitpid(child, NULL, 0);

	printf("vfleet-pingpong source %s\n", SOURCE_SHA256);
	printf("placement %s: CPUs %d and %d\n", placement, cpus[0], cpus[1]);
	printf("round trips %ld in %.3f s\n", trips, elapsed);
	printf("round_trips_per_sec %.1f\n", trips / elapsed);
	// A round trip is two switches: to the child and back.
	printf("ns_per_switch %.1f\n", elapsed * 1e9 / trips / 2);
	return 0;
}
