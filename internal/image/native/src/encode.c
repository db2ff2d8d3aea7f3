// vfleet-encode: how long an audio encoder takes over a fixed input, as
// the Phoronix Test Suite's timed MP3 encoding measures LAME. It writes a
// WAV file (16-bit stereo at 44.1 kHz: a melody of sawtooth and triangle
// tones over noise, all integer arithmetic, so its bytes are the same on
// every machine and architecture) into the working directory, then runs
// the encoder given after "--" on it, with /dev/null as the output, and
// reports the encoder's wall-clock and CPU time. The file is made before
// the clock starts and removed afterwards.
//
// Usage: vfleet-encode [--audio-seconds N] [--version] -- ENCODER [ARG...]
// runs ENCODER ARG... INPUT.wav /dev/null.
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 "unknown"
#endif

enum { RATE = 44100, CHANNELS = 2, BYTES_PER_SAMPLE = 2 };

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t fnv;

static void put(FILE *f, const unsigned char *b, size_t n) {
	for (size_t i = 0; i < n; i++) fnv = (fnv ^ b[i]) * 1099511628211ULL;
	fwrite(b, 1, n, f);
}

static void put_le(FILE *f, uint32_t v, int bytes) {
	unsigned char b[4];
	for (int i = 0; i < bytes; i++) b[i] = v >> (8 * i);
	put(f, b, bytes);
}

static int16_t clip(int32_t v) { return v > 32767 ? 32767 : v < -32768 ? -32768 : v; }

// A note a second half long from a fixed tune, in phase increments of a
// 32-bit accumulator per sample (frequency * 2^32 / RATE).
static uint32_t note_step(long second_half) {
	static const uint32_t hz[] = {262, 294, 330, 349, 392, 440, 494, 523, 440, 392, 330, 294};
	return (uint32_t)(((uint64_t)hz[second_half % 12] << 32) / RATE);
}

// write_wav writes seconds of the input; its FNV-1a hash goes into fnv.
static int write_wav(const char *path, long seconds) {
	FILE *f = fopen(path, "wb");
	if (!f) return -1;
	uint32_t data = (uint32_t)(seconds * RATE * CHANNELS * BYTES_PER_SAMPLE);
	fnv = 14695981039346656037ULL;
	put(f, (const unsigned char *)"RIFF", 4);
	put_le(f, 36 + data, 4);
	put(f, (const unsigned char *)"WAVEfmt ", 8);
	put_le(f, 16, 4);
	put_le(f, 1, 2); // PCM
	put_le(f, CHANNELS, 2);
	put_le(f, RATE, 4);
	put_le(f, RATE * CHANNELS * BYTES_PER_SAMPLE, 4);
	put_le(f, CHANNELS * BYTES_PER_SAMPLE, 2);
	put_le(f, 8 * BYTES_PER_SAMPLE, 2);
	put(f, (const unsigned char *)"data", 4);
	put_le(f, data, 4);
	uint32_t left = 0, right = 0;
	uint64_t noise = 1;
	for (long i = 0; i < seconds * RATE; i++) {
		uint32_t step = note_step(i / (RATE / 2));
		left += step;
		right += step + step / 2; // a fifth above
		noise = noise * 6364136223846793005ULL + 1442695040888963407ULL;
		int32_t hiss = (int16_t)(noise >> 48) / 8;
		int32_t saw = (int32_t)left >> 18;
		int32_t tri = ((int32_t)(right ^ (uint32_t)((int32_t)right >> 31)) >> 17) - 8192;
		unsigned char b[4];
		int16_t l = clip(saw + hiss), r = clip(tri + hiss);
		b[0] = (uint16_t)l, b[1] = (uint16_t)l >> 8, b[2] = (uint16_t)r, b[3] = (uint16_t)r >> 8;
		put(f, b, sizeof b);
	}
	return fclose(f);
}

static int usage(void) {
	fprintf(stderr, "usage: vfleet-encode [--audio-seconds N] [--version] -- ENCODER [ARG...]\n");
	return 2;
}

int main(int argc, char **argv) {
	long seconds = 60;
	int i = 1;
	for (; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--version")) {
			printf("vfleet-encode source %s\n", SOURCE_SHA256);
			return 0;
		}
		if (i + 1 >= argc) return usage();
		if (!strcmp(argv[i], "--audio-seconds")) seconds = atol(argv[++i]);
		else return usage();
	}
	if (i + 1 >= argc || seconds < 1 || seconds > 3600) return usage();
	char **encoder = argv + i + 1;
	int n = argc - i - 1;

	char input[64];
	snprintf(input, sizeof input, "vfleet-encode-%d.wav", (int)getpid());
	if (write_wav(input, seconds) != 0) {
		fprintf(stderr, "vfleet-encode: write %s: %s\n", input, strerror(errno));
		unlink(input);
		return 1;
	}
	char **args = calloc(n + 3, sizeof *args);
	memcpy(args, encoder, n * sizeof *args);
	args[n] = input;
	args[n + 1] = "/dev/null";

	printf("vfleet-encode source %s\n", SOURCE_SHA256);
	printf("input %s: %ld s of %d Hz 16-bit stereo, fnv1a64 %016llx\n", input, seconds, RATE, (unsigned long long)fnv);
	printf("encoder:");
	for (int j = 0; args[j]; j++) printf(" %s", args[j]);
	printf("\n");
	fflush(stdout);

	double t0 = now();
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "vfleet-encode: fork: %s\n", strerror(errno));
		unlink(input);
		return 1;
	}
	if (pid == 0) {
		execvp(args[0], args);
		fprintf(stderr, "vfleet-encode: run %s: %s\n", args[0], strerror(errno));
		_exit(127);
	}
	int status;
	struct rusage ru;
	pid_t waited;
	while ((waited = wait4(pid, &status, 0, &ru)) < 0 && errno == EINTR)
		;
	double wall = now() - t0;
	unlink(input);
	if (waited < 0) {
		fprintf(stderr, "vfleet-encode: wait: %s\n", strerror(errno));
		return 1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		printf("encoder failed: %s %d\n", WIFEXITED(status) ? "exit status" : "signal",
		       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		return 1;
	}
	double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	printf("wall_seconds %.6f\n", wall);
	printf("cpu_seconds %.6f\n", cpu);
	return 0;
}
