/*
 * nn-stream: John McCalpin's STREAM kernels, run by McCalpin's rules.
 *
 * Three arrays of doubles a, b, c; the four kernels
 *
 *     Copy   c = a          16 bytes per element
 *     Scale  b = s*c        16 bytes per element
 *     Add    c = a+b        24 bytes per element
 *     Triad  a = b+s*c      24 bytes per element
 *
 * run in that order, one OpenMP thread per CPU (static schedule, arrays
 * first touched by the thread that later uses them), repeated many times;
 * each kernel's rate is its bytes over its best (shortest) time, the first
 * repetition left out, as stream.c reports it. The results are then
 * validated as stream.c does: the expected values are replayed with the
 * same number of repetitions and the average error of every array must be
 * below 1e-13 relative. The array size is the caller's (nearnative makes
 * it at least 4x the last-level cache, McCalpin's rule).
 *
 * This is a re-implementation, not McCalpin's stream.c (whose licence asks
 * that modified versions be not called STREAM results); its kernels, timing
 * and validation follow version 5.10.
 *
 * Usage: nn-stream -n ELEMENTS [-t THREADS] [-k MIN_REPS] [-T SECONDS] [-K MAX_REPS]
 *   repeats the four kernels at least MIN_REPS times (default 10) and stops
 *   after SECONDS (default 10) or MAX_REPS (default 1000) repetitions;
 *   -t 0 (default) uses one thread per CPU this process may run on; more
 *   threads than that are refused.
 *
 * Output: "key: value" lines; exit 0 when validation passed, 1 when it
 * failed, 2 on bad arguments or oversubscription, 3 when memory runs out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef NN_BUILD
#define NN_BUILD "unknown"
#endif

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void usage(void) {
	fprintf(stderr, "usage: nn-stream -n ELEMENTS [-t THREADS] [-k MIN_REPS] [-T SECONDS] [-K MAX_REPS]\n");
	exit(2);
}

static const char *names[4] = {"copy", "scale", "add", "triad"};
static const double words[4] = {2, 2, 3, 3};

int main(int argc, char **argv) {
	long n = 0, threads = 0, minreps = 10, maxreps = 1000;
	double budget = 10;
	int opt;
	while ((opt = getopt(argc, argv, "n:t:k:T:K:")) != -1) {
		char *end;
		errno = 0;
		switch (opt) {
		case 'n': n = strtol(optarg, &end, 10); break;
		case 't': threads = strtol(optarg, &end, 10); break;
		case 'k': minreps = strtol(optarg, &end, 10); break;
		case 'K': maxreps = strtol(optarg, &end, 10); break;
		case 'T': budget = strtod(optarg, &end); break;
		default: usage();
		}
		if (errno || *end) usage();
	}
	if (optind != argc || n < 1000 || threads < 0 || minreps < 2 || maxreps < minreps || !(budget > 0)) usage();

	cpu_set_t set;
	int cpus = 0;
	if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
	if (cpus < 1) cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (threads == 0) threads = cpus;
	printf("build: %s\n", NN_BUILD);
	printf("compiler: gcc %s\n", __VERSION__);
	printf("cpus: %d\n", cpus);
	if (threads > cpus) {
		fprintf(stderr, "nn-stream: %ld threads on %d CPUs would oversubscribe them: use at most %d\n", threads, cpus, cpus);
		return 2;
	}
	omp_set_dynamic(0);
	omp_set_num_threads((int)threads);
	int got = 0;
#pragma omp parallel
#pragma omp master
	got = omp_get_num_threads();
	printf("threads: %d\n", got);
	printf("elements: %ld\n", n);
	printf("array-bytes: %ld\n", n * (long)sizeof(double));
	fflush(stdout);

	double *a, *b, *c;
	size_t bytes = (size_t)n * sizeof(double);
	if (posix_memalign((void **)&a, 64, bytes) || posix_memalign((void **)&b, 64, bytes) ||
	    posix_memalign((void **)&c, 64, bytes)) {
		fprintf(stderr, "nn-stream: cannot allocate 3 arrays of %.1f MiB\n", bytes / 1048576.0);
		return 3;
	}
	long j;
	/* first touch by the threads that use each part later */
#pragma omp parallel for schedule(static)
	for (j = 0; j < n; j++) {
		a[j] = 1.0;
		b[j] = 2.0;
		c[j] = 0.0;
	}
	double t = now();
#pragma omp parallel for schedule(static)
	for (j = 0; j < n; j++) a[j] = 2.0E0 * a[j];
	printf("first-pass-us: %.0f\n", (now() - t) * 1e6);

	const double scalar = 3.0;
	double best[4] = {FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX}, worst[4] = {0}, sum[4] = {0};
	long reps = 0;
	double start = now();
	for (reps = 0; reps < maxreps; reps++) {
		if (reps >= minreps && now() - start > budget) break;
		double times[4];
		times[0] = now();
#pragma omp parallel for schedule(static)
		for (j = 0; j < n; j++) c[j] = a[j];
		times[0] = now() - times[0];
		times[1] = now();
#pragma omp parallel for schedule(static)
		for (j = 0; j < n; j++) b[j] = scalar * c[j];
		times[1] = now() - times[1];
		times[2] = now();
#pragma omp parallel for schedule(static)
		for (j = 0; j < n; j++) c[j] = a[j] + b[j];
		times[2] = now() - times[2];
		times[3] = now();
#pragma omp parallel for schedule(static)
		for (j = 0; j < n; j++) a[j] = b[j] + scalar * c[j];
		times[3] = now() - times[3];
		if (reps == 0) continue; /* stream.c leaves out the first repetition */
		for (int k = 0; k < 4; k++) {
			if (times[k] < best[k]) best[k] = times[k];
			if (times[k] > worst[k]) worst[k] = times[k];
			sum[k] += times[k];
		}
	}
	printf("repetitions: %ld\n", reps);
	printf("seconds: %.3f\n", now() - start);
	for (int k = 0; k < 4; k++) {
		double mb = words[k] * sizeof(double) * (double)n / 1e6;
		printf("%s-mbps: %.1f\n", names[k], mb / best[k]);
		printf("%s-seconds: best %.6f avg %.6f max %.6f\n", names[k], best[k], sum[k] / (reps - 1), worst[k]);
	}
	if (best[0] < 1e-3)
		printf("warning: the best Copy took %.0f us; with less than 1 ms per kernel the timer's resolution weighs in: use bigger arrays\n", best[0] * 1e6);

	/* validation, as stream.c's checkSTREAMresults */
	double aj = 1.0, bj = 2.0, cj = 0.0;
	aj = 2.0E0 * aj;
	for (long k = 0; k < reps; k++) {
		cj = aj;
		bj = scalar * cj;
		cj = aj + bj;
		aj = bj + scalar * cj;
	}
	double aerr = 0, berr = 0, cerr = 0;
#pragma omp parallel for schedule(static) reduction(+ : aerr, berr, cerr)
	for (j = 0; j < n; j++) {
		aerr += fabs(a[j] - aj);
		berr += fabs(b[j] - bj);
		cerr += fabs(c[j] - cj);
	}
	aerr /= n;
	berr /= n;
	cerr /= n;
	const double epsilon = 1.e-13;
	int ok = fabs(aerr / aj) <= epsilon && fabs(berr / bj) <= epsilon && fabs(cerr / cj) <= epsilon;
	printf("validation-error: a %.3g b %.3g c %.3g (relative; limit %g)\n", aerr / aj, berr / bj, cerr / cj, epsilon);
	printf("check: %s\n", ok ? "PASSED" : "FAILED");
	return ok ? 0 : 1;
}
