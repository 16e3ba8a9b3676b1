/*
 * nn-linpack: HPL's problem, solved with an optimised LAPACK.
 *
 * It does what HPL (the High-Performance LINPACK benchmark) measures on one
 * node: generate a random dense N x N system Ax = b, factor A = LU with
 * partial pivoting and solve, time the factorisation and the solve together,
 * rate them with HPL's operation count 2/3 N^3 + 3/2 N^2, and accept the
 * answer only when HPL's scaled residual
 *
 *     ||Ax - b||_oo / (eps * (||A||_oo * ||x||_oo + ||b||_oo) * N)
 *
 * is below 16. The factorisation and the solve are LAPACK's dgetrf and
 * dgetrs from OpenBLAS (libopenblas.so.0, whose dgetrf is OpenBLAS's own
 * threaded recursive LU on its optimised DGEMM): one process, one BLAS
 * thread per CPU. It is not netlib HPL, which Debian does not package and
 * whose MPI code adds nothing on one machine; see the README.
 *
 * Usage: nn-linpack -n N [-t THREADS] [-s SEED] [-e THRESHOLD] [-g M]
 *   -t 0 (default) uses one thread per CPU this process may run on
 *   (sched_getaffinity); more threads than that are refused.
 *   -g M first times one M x M DGEMM (C = AB) with the same threads, the
 *   machine's practical ceiling for the solve; 0 (default) skips it.
 *
 * Output: "key: value" lines; exit 0 when the residual check passed, 1 when
 * it failed, 2 on bad arguments or oversubscription, 3 when memory runs out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <float.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef NN_BUILD
#define NN_BUILD "unknown"
#endif

/* LAPACK and BLAS (Fortran calling convention) and OpenBLAS's own calls,
 * declared here so that only the runtime library is needed to build. */
extern void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
extern void dgetrs_(const char *trans, const int *n, const int *nrhs, const double *a, const int *lda,
                    const int *ipiv, double *b, const int *ldb, int *info, size_t trans_len);
extern void dgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
                   const double *alpha, const double *a, const int *lda, const double *b, const int *ldb,
                   const double *beta, double *c, const int *ldc, size_t ta_len, size_t tb_len);
extern void dgemv_(const char *trans, const int *m, const int *n, const double *alpha, const double *a,
                   const int *lda, const double *x, const int *incx, const double *beta, double *y,
                   const int *incy, size_t trans_len);
extern void openblas_set_num_threads(int);
extern int openblas_get_num_threads(void);
extern char *openblas_get_config(void);
extern char *openblas_get_corename(void);

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* splitmix64: a small, well-mixed generator; column j of A is drawn from
 * seed+j, so A can be made again for the residual check without a copy. */
static uint64_t mix(uint64_t *s) {
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* uniform in [-0.5, 0.5), as HPL's generator */
static double uniform(uint64_t *s) { return (double)(mix(s) >> 11) * 0x1.0p-53 - 0.5; }

static void generate(double *a, double *b, int n, uint64_t seed) {
	for (int j = 0; j < n; j++) {
		uint64_t s = seed * 0x100000001b3ULL + (uint64_t)j;
		double *col = a + (size_t)j * n;
		for (int i = 0; i < n; i++) col[i] = uniform(&s);
	}
	uint64_t s = ~seed;
	for (int i = 0; i < n; i++) b[i] = uniform(&s);
}

/* the shared libraries of this process whose name mentions BLAS or LAPACK,
 * as the dynamic loader really mapped them */
static void print_libs(void) {
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f) return;
	char line[4096], seen[16][1024];
	int nseen = 0;
	while (fgets(line, sizeof line, f)) {
		char *p = strchr(line, '/');
		if (!p) continue;
		p[strcspn(p, "\n")] = 0;
		if (!strstr(p, "blas") && !strstr(p, "lapack")) continue;
		int dup = 0;
		for (int i = 0; i < nseen; i++) dup |= strcmp(seen[i], p) == 0;
		if (dup || nseen == 16) continue;
		snprintf(seen[nseen++], sizeof seen[0], "%s", p);
		printf("library: %s\n", p);
	}
	fclose(f);
}

/* big allocates the matrix on 2 MiB boundaries and asks for transparent
 * huge pages, as the seed's runs had them (a no-op where THP is off). */
static int thp;
static void *big(size_t bytes) {
	void *p = NULL;
	size_t huge = 2u << 20;
	bytes = (bytes + huge - 1) / huge * huge;
	if (posix_memalign(&p, huge, bytes) != 0) return NULL;
	thp = madvise(p, bytes, MADV_HUGEPAGE) == 0;
	return p;
}

/* dgemm_rate times C = AB for M x M matrices twice (after one small call
 * that starts the BLAS threads) and prints the better rate */
static int dgemm_rate(int m) {
	double *a = big((size_t)m * m * sizeof(double)), *b = big((size_t)m * m * sizeof(double)),
	       *c = big((size_t)m * m * sizeof(double));
	if (!a || !b || !c) {
		fprintf(stderr, "nn-linpack: cannot allocate the DGEMM matrices for M=%d\n", m);
		return -1;
	}
	uint64_t s = 7;
	for (size_t i = 0; i < (size_t)m * m; i++) {
		a[i] = uniform(&s);
		b[i] = uniform(&s);
		c[i] = 0;
	}
	double one = 1, zero = 0;
	int w = m < 256 ? m : 256;
	dgemm_("N", "N", &w, &w, &w, &one, a, &w, b, &w, &zero, c, &w, 1, 1);
	double secs = 1e30;
	for (int r = 0; r < 2; r++) { /* the better of two: the first pays for OpenBLAS's buffers */
		double t0 = now();
		dgemm_("N", "N", &m, &m, &m, &one, a, &m, b, &m, &zero, c, &m, 1, 1);
		double t = now() - t0;
		if (t < secs) secs = t;
	}
	printf("dgemm-m: %d\n", m);
	printf("dgemm-seconds: %.6f\n", secs);
	printf("dgemm-gflops: %.4f\n", 2.0 * m * m * (double)m / secs / 1e9);
	fflush(stdout);
	free(a);
	free(b);
	free(c);
	return 0;
}

static void usage(void) {
	fprintf(stderr, "usage: nn-linpack -n N [-t THREADS] [-s SEED] [-e THRESHOLD] [-g M]\n");
	exit(2);
}

int main(int argc, char **argv) {
	long n = 0, threads = 0, gemm = 0;
	unsigned long long seed = 42;
	double threshold = 16.0;
	int c;
	while ((c = getopt(argc, argv, "n:t:s:e:g:")) != -1) {
		char *end;
		errno = 0;
		switch (c) {
		case 'n': n = strtol(optarg, &end, 10); break;
		case 't': threads = strtol(optarg, &end, 10); break;
		case 's': seed = strtoull(optarg, &end, 10); break;
		case 'e': threshold = strtod(optarg, &end); break;
		case 'g': gemm = strtol(optarg, &end, 10); break;
		default: usage();
		}
		if (errno || *end) usage();
	}
	if (optind != argc || n < 1 || n > 2000000 || threads < 0 || !(threshold > 0) || gemm < 0 || gemm > 20000) usage();

	cpu_set_t set;
	int cpus = 0;
	if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
	if (cpus < 1) cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (threads == 0) threads = cpus;
	printf("build: %s\n", NN_BUILD);
	printf("compiler: gcc %s\n", __VERSION__);
	printf("cpus: %d\n", cpus);
	if (threads > cpus) {
		fprintf(stderr, "nn-linpack: %ld BLAS threads on %d CPUs would oversubscribe them: use at most %d\n", threads, cpus, cpus);
		return 2;
	}
	openblas_set_num_threads((int)threads);
	printf("threads: %d\n", openblas_get_num_threads());
	printf("openblas-config: %s\n", openblas_get_config());
	printf("openblas-core: %s\n", openblas_get_corename());
	print_libs();
	printf("n: %ld\n", n);
	fflush(stdout);

	if (gemm > 0 && dgemm_rate((int)gemm) < 0) return 3;

	int N = (int)n, one = 1, info = 0;
	double *a = big((size_t)N * N * sizeof(double));
	double *b = malloc(sizeof(double) * N);
	double *x = malloc(sizeof(double) * N);
	int *ipiv = malloc(sizeof(int) * N);
	if (!a || !b || !x || !ipiv) {
		fprintf(stderr, "nn-linpack: cannot allocate %.1f MiB for N=%d\n", 8.0 * N * N / 1048576, N);
		return 3;
	}
	printf("huge-pages: %s\n", thp ? "requested (madvise)" : "not available");
	double t0 = now();
	generate(a, b, N, seed);
	memcpy(x, b, sizeof(double) * N);
	printf("generate-seconds: %.3f\n", now() - t0);
	fflush(stdout);

	t0 = now();
	dgetrf_(&N, &N, a, &N, ipiv, &info);
	if (info == 0) dgetrs_("N", &N, &one, a, &N, ipiv, x, &N, &info, 1);
	double secs = now() - t0;
	if (info != 0) {
		fprintf(stderr, "nn-linpack: dgetrf/dgetrs info %d (singular matrix?)\n", info);
		printf("check: FAILED\n");
		return 1;
	}
	double flops = 2.0 / 3.0 * (double)N * N * N + 1.5 * (double)N * N;
	printf("seconds: %.6f\n", secs);
	printf("gflops: %.4f\n", flops / secs / 1e9);

	/* the residual, HPL's way: A and b made again from the seed */
	t0 = now();
	generate(a, b, N, seed);
	double anorm = 0, bnorm = 0, xnorm = 0, rnorm = 0;
	double *rows = calloc(N, sizeof(double));
	if (!rows) return 3;
	for (int j = 0; j < N; j++) {
		const double *col = a + (size_t)j * N;
		for (int i = 0; i < N; i++) rows[i] += fabs(col[i]);
	}
	for (int i = 0; i < N; i++) {
		if (rows[i] > anorm) anorm = rows[i];
		if (fabs(b[i]) > bnorm) bnorm = fabs(b[i]);
		if (fabs(x[i]) > xnorm) xnorm = fabs(x[i]);
	}
	double alpha = 1.0, beta = -1.0;
	dgemv_("N", &N, &N, &alpha, a, &N, x, &one, &beta, b, &one, 1); /* b := A x - b */
	for (int i = 0; i < N; i++)
		if (fabs(b[i]) > rnorm) rnorm = fabs(b[i]);
	double eps = DBL_EPSILON / 2; /* HPL_dlamch(HPL_MACH_EPS): 2^-53 */
	double resid = rnorm / (eps * (anorm * xnorm + bnorm) * N);
	printf("check-seconds: %.3f\n", now() - t0);
	printf("residual: %.6g\n", resid);
	printf("threshold: %g\n", threshold);
	int ok = isfinite(resid) && resid < threshold;
	printf("check: %s\n", ok ? "PASSED" : "FAILED");
	return ok ? 0 : 1;
}
