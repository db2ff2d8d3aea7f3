// vfleet's start gate: a library the agent preloads into a measuring tool
// that must start in many guests at one moment. The dynamic loader runs
// this constructor after the tool is loaded, linked and relocated, and
// before its main: the gate says "ready" on the socket the agent passed
// and sleeps until the moment on the kernel's clock. Forking, executing
// and loading, which queued 100 guests' tools behind each other on a small
// host, are done before the moment; and at the moment no process (no
// agent) has to be scheduled to let the tools go: one timer interrupt
// wakes them all.
//
// Waking, the gate answers with when it was let go and how long it then
// waited for a CPU (from the scheduler's own account in
// /proc/self/schedstat): with more tools than CPUs, the last one's first
// instruction comes a scheduler turn after the moment, which is sharing,
// not a late start, and vfleet reports the two apart.
//
// The agent hanging up before the moment cancels the tool. A process given
// no socket is left alone, and the gate removes itself from the
// environment so that the tool's own children never wait.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 "unknown"
#endif

// The version string is kept in the library so that an image's copy can be
// told apart from another source, as the programs' --version does.
__attribute__((used)) static const char version[] = "vfleet-start-gate source " SOURCE_SHA256;

static int write_all(int fd, const void *buf, size_t n) {
	const char *p = buf;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

// run_delay is the time, in ns, this thread has spent runnable but waiting
// for a CPU; -1 when the kernel does not keep the account.
static int64_t run_delay(void) {
	int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[128];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	unsigned long long on_cpu, waited;
	if (sscanf(buf, "%llu %llu", &on_cpu, &waited) != 2)
		return -1;
	return (int64_t)waited;
}

static int64_t env_int(const char *name, int64_t min) {
	const char *v = getenv(name);
	char *end;
	if (v == NULL)
		_exit(126);
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (errno != 0 || *end != '\0' || x < min)
		_exit(126);
	return x;
}

static void put_le(unsigned char *b, int64_t v) {
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)((uint64_t)v >> (8 * i));
}

__attribute__((constructor)) static void wait_for_the_moment(void) {
	if (getenv("VFLEET_GATE_FD") == NULL)
		return;
	int fd = (int)env_int("VFLEET_GATE_FD", 3);
	int64_t moment = env_int("VFLEET_GATE_AT", 1);
	unsetenv("VFLEET_GATE_FD");
	unsetenv("VFLEET_GATE_AT");
	unsetenv("LD_PRELOAD");

	int timer = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC);
	struct itimerspec at = {.it_value = {.tv_sec = moment / 1000000000, .tv_nsec = moment % 1000000000}};
	if (timer < 0 || timerfd_settime(timer, TFD_TIMER_ABSTIME, &at, NULL) != 0)
		_exit(126);
	if (write_all(fd, "r", 1) != 0)
		_exit(125);
	int64_t delay_before = run_delay();

	struct pollfd wait[2] = {{.fd = timer, .events = POLLIN}, {.fd = fd, .events = POLLIN}};
	for (;;) {
		int n = poll(wait, 2, -1);
		if (n < 0 && errno == EINTR)
			continue;
		// The agent hung up, or wrote: either way, it cancels.
		if (n < 0 || wait[1].revents != 0)
			_exit(125);
		if (wait[0].revents != 0)
			break;
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t ran = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	int64_t delay_after = run_delay();
	int64_t waited = delay_before >= 0 && delay_after >= delay_before ? delay_after - delay_before : -1;
	close(timer);

	unsigned char answer[16];
	put_le(answer, ran);
	put_le(answer + 8, waited);
	(void)write_all(fd, answer, sizeof answer);
	close(fd);
}
