/*
 * nn-rr: TCP request/response round trips, as netperf's TCP_RR measures
 * them: one connection, TCP_NODELAY, a request of SIZE bytes (netperf's
 * default: 1), the server answers with as many bytes, the client sends the
 * next request when the whole answer has arrived. One transaction is in
 * flight at a time (closed loop), so the rate is 1/RTT. The client times
 * every round trip with CLOCK_MONOTONIC and reports their mean and
 * percentiles. Blocking send and recv on both sides, as netperf.
 *
 * Usage:
 *   nn-rr server -i ADDR -p PORT
 *       accepts connections and echoes every byte it reads, a thread per
 *       connection, until killed
 *   nn-rr client -i ADDR -p PORT [-m SIZE] [-t SECONDS] [-w WARMUP]
 *       runs WARMUP seconds (default 0.5) unmeasured, then SECONDS
 *       (default 10) measured; prints "measure: start" and "measure: end"
 *       at the edges of the measured window (for CPU counters read
 *       around it), then "key: value" lines
 *
 * Exit: 0 done, 1 the connection failed or was closed, 2 bad arguments.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef NN_BUILD
#define NN_BUILD "unknown"
#endif

#define MAXMSG 65536

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void usage(void) {
	fprintf(stderr, "usage: nn-rr server -i ADDR -p PORT\n"
	                "       nn-rr client -i ADDR -p PORT [-m SIZE] [-t SECONDS] [-w WARMUP]\n");
	exit(2);
}

static void nodelay(int fd) {
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* resolve fills addr for host:port (numeric addresses, IPv4 or IPv6) */
static int resolve(const char *host, const char *port, struct addrinfo **out, int passive) {
	struct addrinfo hints;
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	int rc = getaddrinfo(host, port, &hints, out);
	if (rc != 0) {
		fprintf(stderr, "nn-rr: address %s port %s: %s\n", host, port, gai_strerror(rc));
		return -1;
	}
	return 0;
}

static void *echo(void *arg) {
	int fd = (int)(intptr_t)arg;
	char buf[MAXMSG];
	nodelay(fd);
	for (;;) {
		ssize_t r = recv(fd, buf, sizeof buf, 0);
		if (r < 0 && errno == EINTR) continue;
		if (r <= 0) break;
		for (ssize_t off = 0; off < r;) {
			ssize_t w = send(fd, buf + off, r - off, MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR) continue;
			if (w <= 0) goto done;
			off += w;
		}
	}
done:
	close(fd);
	return NULL;
}

static int server(const char *host, const char *port) {
	struct addrinfo *ai;
	if (resolve(host, port, &ai, 1) < 0) return 2;
	int ls = socket(ai->ai_family, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (ls < 0 || bind(ls, ai->ai_addr, ai->ai_addrlen) < 0 || listen(ls, 64) < 0) {
		fprintf(stderr, "nn-rr: listening on %s port %s: %s\n", host, port, strerror(errno));
		return 1;
	}
	freeaddrinfo(ai);
	printf("build: %s\nlistening: %s port %s\n", NN_BUILD, host, port);
	fflush(stdout);
	for (;;) {
		int fd = accept(ls, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED) continue;
			fprintf(stderr, "nn-rr: accept: %s\n", strerror(errno));
			return 1;
		}
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&at, 4 * MAXMSG + (1 << 16));
		if (pthread_create(&t, &at, echo, (void *)(intptr_t)fd) != 0) close(fd);
		pthread_attr_destroy(&at);
	}
}

static int cmp(const void *x, const void *y) {
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return (a > b) - (a < b);
}

/* pct is the nearest-rank percentile p (0..100] of the sorted samples, in us */
static double pct(const uint32_t *s, size_t n, double p) {
	size_t rank = (size_t)ceil(p / 100.0 * (double)n);
	if (rank < 1) rank = 1;
	if (rank > n) rank = n;
	return s[rank - 1] / 1000.0;
}

/* transact sends one request of m bytes and reads the whole answer */
static int transact(int fd, char *buf, long m) {
	for (long off = 0; off < m;) {
		ssize_t w = send(fd, buf + off, m - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR) continue;
		if (w <= 0) return -1;
		off += w;
	}
	for (long got = 0; got < m;) {
		ssize_t r = recv(fd, buf + got, m - got, 0);
		if (r < 0 && errno == EINTR) continue;
		if (r == 0) {
			errno = ECONNRESET;
			return -1;
		}
		if (r < 0) return -1;
		got += r;
	}
	return 0;
}

static int client(const char *host, const char *port, long m, double secs, double warm) {
	struct addrinfo *ai;
	if (resolve(host, port, &ai, 0) < 0) return 2;
	int fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		fprintf(stderr, "nn-rr: connecting to %s port %s: %s\n", host, port, strerror(errno));
		return 1;
	}
	freeaddrinfo(ai);
	nodelay(fd);
	printf("build: %s\ncompiler: gcc %s\n", NN_BUILD, __VERSION__);
	printf("server: %s port %s\nmsgsize: %ld\nwarmup-seconds: %g\n", host, port, m, warm);
	fflush(stdout);
	char *buf = calloc(1, MAXMSG);
	size_t cap = 1 << 20, n = 0;
	uint32_t *rtt = calloc(cap, sizeof *rtt);
	if (!buf || !rtt) return 1;
	memset(buf, 'r', m);

	uint64_t t0 = now_ns(), warmEnd = t0 + (uint64_t)(warm * 1e9);
	while (now_ns() < warmEnd)
		if (transact(fd, buf, m) < 0) goto failed;

	struct rusage ru0, ru1;
	getrusage(RUSAGE_SELF, &ru0);
	printf("measure: start\n");
	fflush(stdout);
	uint64_t start = now_ns(), end = start + (uint64_t)(secs * 1e9), t = start;
	while (t < end) {
		/* room first, so that growing the array is never timed */
		if (n == cap) {
			cap *= 2;
			uint32_t *g = realloc(rtt, cap * sizeof *rtt);
			if (!g) return 1;
			memset(g + n, 0, (cap - n) * sizeof *g);
			rtt = g;
		}
		t = now_ns();
		if (transact(fd, buf, m) < 0) goto failed;
		uint64_t d = now_ns() - t;
		rtt[n++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
		t += d;
	}
	double took = (t - start) / 1e9;
	getrusage(RUSAGE_SELF, &ru1);
	printf("measure: end\n");
	fflush(stdout);
	close(fd);

	double sum = 0, sq = 0;
	for (size_t i = 0; i < n; i++) sum += rtt[i] / 1000.0;
	double mean = sum / n;
	for (size_t i = 0; i < n; i++) sq += (rtt[i] / 1000.0 - mean) * (rtt[i] / 1000.0 - mean);
	qsort(rtt, n, sizeof *rtt, cmp);
	double cpu = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) + (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
	             ((ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) + (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec)) / 1e6;
	printf("transactions: %zu\nseconds: %.6f\ntransactions-per-sec: %.1f\n", n, took, n / took);
	printf("rtt-mean-us: %.3f\nrtt-stddev-us: %.3f\n", mean, n > 1 ? sqrt(sq / (n - 1)) : 0.0);
	printf("rtt-min-us: %.3f\nrtt-p50-us: %.3f\nrtt-p90-us: %.3f\nrtt-p99-us: %.3f\nrtt-p999-us: %.3f\nrtt-max-us: %.3f\n",
	       rtt[0] / 1000.0, pct(rtt, n, 50), pct(rtt, n, 90), pct(rtt, n, 99), pct(rtt, n, 99.9), rtt[n - 1] / 1000.0);
	printf("client-cpu-seconds: %.3f\n", cpu);
	return 0;
failed:
	fprintf(stderr, "nn-rr: round trip %zu: %s\n", n, strerror(errno));
	return 1;
}

int main(int argc, char **argv) {
	if (argc < 2) usage();
	const char *mode = argv[1], *host = NULL, *port = NULL;
	long m = 1;
	double secs = 10, warm = 0.5;
	int opt;
	optind = 2;
	while ((opt = getopt(argc, argv, "i:p:m:t:w:")) != -1) {
		char *end = NULL;
		errno = 0;
		switch (opt) {
		case 'i': host = optarg; continue;
		case 'p': port = optarg; continue;
		case 'm': m = strtol(optarg, &end, 10); break;
		case 't': secs = strtod(optarg, &end); break;
		case 'w': warm = strtod(optarg, &end); break;
		default: usage();
		}
		if (errno || *end) usage();
	}
	if (optind != argc || !host || !port) usage();
	signal(SIGPIPE, SIG_IGN);
	if (strcmp(mode, "server") == 0) return server(host, port);
	if (strcmp(mode, "client") != 0 || m < 1 || m > MAXMSG || !(secs > 0) || !(warm >= 0)) usage();
	return client(host, port, m, secs, warm);
}
