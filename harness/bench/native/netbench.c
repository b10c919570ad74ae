/*
 * netbench: the benchmark report's load tool (harness/bench/report.ts). One binary,
 * three roles, all plain TCP on IPv4:
 *
 *   netbench server --port P --name NAME
 *       epoll HTTP server: reads one request, answers "200 OK" with body
 *       "NAME\n" and closes the connection (every request is a new connection).
 *       A first line that is not HTTP ("hi\n", as trace sends) is answered
 *       with the line "NAME\n": one server is both a benchmark backend and a
 *       trace target (the kind benchmark's pods).
 *
 *   netbench client --target LABEL[@SRCIP]=IP:PORT[,IP:PORT...] ... [--mode latency|rate]
 *                   [--count N] [--block B] [--warmup W]            (latency mode)
 *                   [--seconds S] [--slice-ms MS] [--concurrency C]  (rate mode)
 *                   [--timeout-ms T]
 *       One operation = socket() + connect() + "GET / HTTP/1.1 ... Connection:
 *       close" + read to end of stream + close(), timed from before socket() to
 *       after close() (connect+request latency). Addresses of a target are used
 *       round-robin; @SRCIP binds the target's connections to that local address.
 *       latency: one operation at a time; targets take turns in blocks of B,
 *                the order rotating every round, so drift hits them alike.
 *       rate:    C threads run operations back to back for slices of MS on one
 *                target, targets taking turns until each had S seconds.
 *       Prints one JSON line: per target n, errors by errno name, seconds,
 *       rate (ops/s), p50/p90/p99/p99.9/max/mean in microseconds, and the
 *       median of each block/slice.
 *
 *   netbench trace --target IP:PORT [--gap-us G] [--timeout-ms T] [--seconds S]
 *       One connection after another, G microseconds apart: sends "hi\n" and
 *       reads one line (the lab's pod server answers "<pod> <client>"), then
 *       closes with RST (no TIME_WAIT). Prints "<unix ms> <pod>|<error>" per
 *       attempt, flushed, until killed or S seconds passed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_TARGETS 8
#define MAX_ADDRS 64

static void die(const char *msg) {
	printf("{\"fatal\":\"%s: %s\"}\n", msg, strerror(errno));
	exit(1);
}

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double wall_ms(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------------ server */

struct conn {
	int fd;
	int used;
	char buf[2048];
};

static __attribute__((noreturn)) void server(int port, const char *name) {
	char resp[512];
	int body = (int)strlen(name) + 1;
	int rlen = snprintf(resp, sizeof resp,
			    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
			    body, name);
	char line[300];
	int llen = snprintf(line, sizeof line, "%s\n", name);
	signal(SIGPIPE, SIG_IGN);
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (ls < 0) die("socket");
	int one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY)};
	if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
	if (listen(ls, 4096) < 0) die("listen");
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
	fprintf(stderr, "netbench server %s on :%d\n", name, port);
	struct epoll_event evs[256];
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);
		if (n < 0 && errno == EINTR) continue;
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			if (!c) {
				for (;;) {
					int fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK);
					if (fd < 0) break;
					setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
					c = calloc(1, sizeof *c);
					c->fd = fd;
					struct epoll_event ce = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
					epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce);
				}
				continue;
			}
			int done = 0;
			for (;;) {
				ssize_t r = read(c->fd, c->buf + c->used, sizeof c->buf - 1 - c->used);
				if (r > 0) {
					c->used += (int)r;
					c->buf[c->used] = 0;
					if (strstr(c->buf, "\r\n\r\n")) {
						if (write(c->fd, resp, rlen) < 0) { /* peer gone */ }
						done = 1;
						break;
					}
					/* A line that is no HTTP request line: the trace protocol. */
					if (strchr(c->buf, '\n') && !strstr(c->buf, " HTTP/")) {
						if (write(c->fd, line, llen) < 0) { /* peer gone */ }
						done = 1;
						break;
					}
					if (c->used >= (int)sizeof c->buf - 1) { done = 1; break; }
					continue;
				}
				if (r == 0 || (errno != EAGAIN && errno != EINTR)) done = 1;
				break;
			}
			if (done) {
				close(c->fd); /* also removes it from the epoll set */
				free(c);
			}
		}
	}
}

/* ------------------------------------------------------------------ client */

struct target {
	const char *label;
	struct sockaddr_in addrs[MAX_ADDRS];
	int naddrs;
	struct sockaddr_in src; /* sin_family 0: any */
	unsigned next;
	/* samples in microseconds */
	double *samples;
	size_t n, cap;
	double *blocks;
	size_t nblocks, capblocks;
	double seconds;
	struct { int err; long count; } errors[32];
	int nerrors;
};

static struct target targets[MAX_TARGETS];
static int ntargets;
static int timeout_ms = 3000;
static const char request[] = "GET / HTTP/1.1\r\nHost: bench\r\nUser-Agent: netbench\r\nConnection: close\r\n\r\n";

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void push(double **arr, size_t *n, size_t *cap, double v) {
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 1024;
		*arr = realloc(*arr, *cap * sizeof **arr);
	}
	(*arr)[(*n)++] = v;
}

static void count_error(struct target *t, int err) {
	for (int i = 0; i < t->nerrors; i++)
		if (t->errors[i].err == err) { t->errors[i].count++; return; }
	if (t->nerrors < 32) { t->errors[t->nerrors].err = err; t->errors[t->nerrors].count = 1; t->nerrors++; }
}

static int wait_fd(int fd, short events, int ms) {
	struct pollfd p = {.fd = fd, .events = events};
	int r = poll(&p, 1, ms);
	if (r == 0) { errno = ETIMEDOUT; return -1; }
	if (r < 0) return -1;
	return 0;
}

/* Non-blocking connect with a timeout, from `src` when given; returns the socket or -1 (errno set). */
static int connect_to(const struct sockaddr_in *a, const struct sockaddr_in *src) {
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0) return -1;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (src && src->sin_family) {
		/* The port is chosen at connect(), as without bind(). */
		setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
		if (bind(fd, (const struct sockaddr *)src, sizeof *src) < 0) { int e = errno; close(fd); errno = e; return -1; }
	}
	if (connect(fd, (const struct sockaddr *)a, sizeof *a) < 0) {
		if (errno != EINPROGRESS) { int e = errno; close(fd); errno = e; return -1; }
		if (wait_fd(fd, POLLOUT, timeout_ms) < 0) { int e = errno; close(fd); errno = e; return -1; }
		int err = 0;
		socklen_t l = sizeof err;
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
		if (err) { close(fd); errno = err; return -1; }
	}
	return fd;
}

/* One operation; returns microseconds, or -errno. */
static double op(const struct sockaddr_in *a, const struct sockaddr_in *src) {
	uint64_t t0 = now_ns();
	int fd = connect_to(a, src);
	if (fd < 0) return -(double)errno;
	if (write(fd, request, sizeof request - 1) != (ssize_t)(sizeof request - 1)) { int e = errno; close(fd); return -(double)e; }
	char buf[1024];
	size_t got = 0;
	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);
		if (r > 0) { got += (size_t)r; continue; }
		if (r == 0) break;
		if (errno == EAGAIN) {
			if (wait_fd(fd, POLLIN, timeout_ms) < 0) { int e = errno; close(fd); return -(double)e; }
			continue;
		}
		if (errno == EINTR) continue;
		int e = errno;
		close(fd);
		return -(double)e;
	}
	close(fd);
	if (got < 12) return -(double)EPROTO;
	return (double)(now_ns() - t0) / 1e3;
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double quantile(double *s, size_t n, double q) {
	if (n == 0) return -1;
	double pos = (double)(n - 1) * q;
	size_t lo = (size_t)pos, hi = lo + 1 < n ? lo + 1 : lo;
	return s[lo] + (s[hi] - s[lo]) * (pos - (double)lo);
}

static double median_of(double *xs, size_t n) {
	double *c = malloc((n ? n : 1) * sizeof *c);
	memcpy(c, xs, n * sizeof *c);
	qsort(c, n, sizeof *c, cmp_double);
	double m = quantile(c, n, 0.5);
	free(c);
	return m;
}

static void parse_target(char *spec) {
	if (ntargets >= MAX_TARGETS) { errno = E2BIG; die("too many targets"); }
	struct target *t = &targets[ntargets++];
	char *eq = strchr(spec, '=');
	if (!eq) { errno = EINVAL; die("target: want LABEL=IP:PORT[,IP:PORT...]"); }
	*eq = 0;
	t->label = spec;
	char *at = strchr(spec, '@');
	if (at) {
		*at = 0;
		t->src.sin_family = AF_INET;
		if (inet_pton(AF_INET, at + 1, &t->src.sin_addr) != 1) { errno = EINVAL; die("target source address"); }
	}
	for (char *tok = strtok(eq + 1, ","); tok; tok = strtok(NULL, ",")) {
		char *colon = strrchr(tok, ':');
		if (!colon || t->naddrs >= MAX_ADDRS) { errno = EINVAL; die("target address"); }
		*colon = 0;
		struct sockaddr_in *a = &t->addrs[t->naddrs++];
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)atoi(colon + 1));
		if (inet_pton(AF_INET, tok, &a->sin_addr) != 1) { errno = EINVAL; die("target address"); }
	}
}

struct rate_arg {
	struct target *t;
	uint64_t until;
	double *samples;
	size_t n, cap;
};

static void *rate_worker(void *p) {
	struct rate_arg *ra = p;
	struct target *t = ra->t;
	while (now_ns() < ra->until) {
		pthread_mutex_lock(&mu);
		unsigned i = t->next++ % (unsigned)t->naddrs;
		pthread_mutex_unlock(&mu);
		double us = op(&t->addrs[i], &t->src);
		if (us >= 0) push(&ra->samples, &ra->n, &ra->cap, us);
		else { pthread_mutex_lock(&mu); count_error(t, (int)-us); pthread_mutex_unlock(&mu); }
	}
	return NULL;
}

static void print_results(const char *mode) {
	printf("{\"mode\":\"%s\",\"targets\":{", mode);
	for (int k = 0; k < ntargets; k++) {
		struct target *t = &targets[k];
		qsort(t->samples, t->n, sizeof *t->samples, cmp_double);
		double sum = 0;
		for (size_t i = 0; i < t->n; i++) sum += t->samples[i];
		printf("%s\"%s\":{\"n\":%zu,\"seconds\":%.6f,\"rate\":%.1f,\"mean\":%.2f,\"p50\":%.2f,\"p90\":%.2f,\"p99\":%.2f,\"p999\":%.2f,\"min\":%.2f,\"max\":%.2f,\"errors\":{",
		       k ? "," : "", t->label, t->n, t->seconds, t->seconds > 0 ? (double)t->n / t->seconds : 0,
		       t->n ? sum / (double)t->n : -1, quantile(t->samples, t->n, 0.5), quantile(t->samples, t->n, 0.9),
		       quantile(t->samples, t->n, 0.99), quantile(t->samples, t->n, 0.999),
		       t->n ? t->samples[0] : -1, t->n ? t->samples[t->n - 1] : -1);
		for (int i = 0; i < t->nerrors; i++)
			printf("%s\"%s\":%ld", i ? "," : "", strerrorname_np(t->errors[i].err) ? strerrorname_np(t->errors[i].err) : "E?", t->errors[i].count);
		printf("},\"blocks\":[");
		for (size_t i = 0; i < t->nblocks; i++) printf("%s%.2f", i ? "," : "", t->blocks[i]);
		printf("]}");
	}
	printf("}}\n");
}

static int client(int argc, char **argv) {
	const char *mode = "latency";
	long count = 2000, block = 100, warmup = 100, concurrency = 4, slice_ms = 1000;
	double seconds = 5;
	for (int i = 0; i < argc; i++) {
		const char *k = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) { errno = EINVAL; die(k); }
		i++;
		if (!strcmp(k, "--target")) parse_target((char *)v);
		else if (!strcmp(k, "--mode")) mode = v;
		else if (!strcmp(k, "--count")) count = atol(v);
		else if (!strcmp(k, "--block")) block = atol(v);
		else if (!strcmp(k, "--warmup")) warmup = atol(v);
		else if (!strcmp(k, "--seconds")) seconds = atof(v);
		else if (!strcmp(k, "--slice-ms")) slice_ms = atol(v);
		else if (!strcmp(k, "--concurrency")) concurrency = atol(v);
		else if (!strcmp(k, "--timeout-ms")) timeout_ms = atoi(v);
		else { errno = EINVAL; die(k); }
	}
	if (ntargets == 0) { errno = EINVAL; die("no --target"); }
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(mode, "latency")) {
		for (int k = 0; k < ntargets; k++)
			for (long i = 0; i < warmup; i++) op(&targets[k].addrs[targets[k].next++ % (unsigned)targets[k].naddrs], &targets[k].src);
		long rounds = (count + block - 1) / block;
		for (long r = 0; r < rounds; r++) {
			long n = count - r * block < block ? count - r * block : block;
			for (int j = 0; j < ntargets; j++) {
				struct target *t = &targets[(r + j) % ntargets];
				size_t first = t->n;
				uint64_t t0 = now_ns();
				for (long i = 0; i < n; i++) {
					double us = op(&t->addrs[t->next++ % (unsigned)t->naddrs], &t->src);
					if (us >= 0) push(&t->samples, &t->n, &t->cap, us);
					else count_error(t, (int)-us);
				}
				t->seconds += (double)(now_ns() - t0) / 1e9;
				push(&t->blocks, &t->nblocks, &t->capblocks, median_of(t->samples + first, t->n - first));
			}
		}
	} else if (!strcmp(mode, "rate")) {
		long slices = (long)(seconds * 1000 / (double)slice_ms + 0.5);
		if (slices < 1) slices = 1;
		pthread_t th[64];
		struct rate_arg ra[64];
		if (concurrency < 1 || concurrency > 64) { errno = EINVAL; die("--concurrency 1..64"); }
		for (long s = 0; s < slices; s++) {
			for (int j = 0; j < ntargets; j++) {
				struct target *t = &targets[(s + j) % ntargets];
				uint64_t t0 = now_ns();
				for (long c = 0; c < concurrency; c++) {
					ra[c] = (struct rate_arg){.t = t, .until = t0 + (uint64_t)slice_ms * 1000000ull};
					pthread_create(&th[c], NULL, rate_worker, &ra[c]);
				}
				size_t done = 0;
				for (long c = 0; c < concurrency; c++) {
					pthread_join(th[c], NULL);
					for (size_t i = 0; i < ra[c].n; i++) push(&t->samples, &t->n, &t->cap, ra[c].samples[i]);
					done += ra[c].n;
					free(ra[c].samples);
				}
				double secs = (double)(now_ns() - t0) / 1e9;
				t->seconds += secs;
				push(&t->blocks, &t->nblocks, &t->capblocks, (double)done / secs);
			}
		}
	} else {
		errno = EINVAL;
		die("--mode latency|rate");
	}
	print_results(mode);
	return 0;
}

/* ------------------------------------------------------------------ trace */

static int trace(int argc, char **argv) {
	char *spec = NULL;
	long gap_us = 2000;
	double seconds = 3600;
	for (int i = 0; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--target")) spec = argv[i + 1];
		else if (!strcmp(argv[i], "--gap-us")) gap_us = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--timeout-ms")) timeout_ms = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
		else { errno = EINVAL; die(argv[i]); }
	}
	if (!spec) { errno = EINVAL; die("no --target"); }
	char lbl[] = "t=";
	char buf[256];
	snprintf(buf, sizeof buf, "%s%s", lbl, spec);
	parse_target(buf);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	while (now_ns() < end) {
		uint64_t t0 = now_ns();
		double when = wall_ms();
		char what[300] = "";
		int fd = connect_to(&targets[0].addrs[0], NULL);
		if (fd < 0) {
			snprintf(what, sizeof what, "%s", strerrorname_np(errno) ? strerrorname_np(errno) : "E?");
		} else {
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
			size_t used = 0;
			char line[256];
			if (write(fd, "hi\n", 3) != 3) snprintf(what, sizeof what, "EWRITE");
			while (!what[0]) {
				if (wait_fd(fd, POLLIN, timeout_ms) < 0) { snprintf(what, sizeof what, "ETIMEDOUT"); break; }
				ssize_t r = read(fd, line + used, sizeof line - 1 - used);
				if (r <= 0) { if (r < 0 && errno == EAGAIN) continue; snprintf(what, sizeof what, "ECLOSED"); break; }
				used += (size_t)r;
				line[used] = 0;
				char *nl = strchr(line, '\n');
				if (nl || used >= sizeof line - 1) {
					char *sp = strchr(line, ' ');
					if (sp) *sp = 0;
					if (nl) *nl = 0;
					snprintf(what, sizeof what, "%s", line);
				}
			}
			close(fd);
		}
		printf("%.3f %s\n", when, what);
		uint64_t spent = now_ns() - t0;
		if (spent < (uint64_t)gap_us * 1000) {
			uint64_t left = (uint64_t)gap_us * 1000 - spent;
			struct timespec ts = {.tv_sec = (time_t)(left / 1000000000ull), .tv_nsec = (long)(left % 1000000000ull)};
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}

int main(int argc, char **argv) {
	if (argc >= 2 && !strcmp(argv[1], "server")) {
		int port = 8090;
		const char *name = "pod";
		for (int i = 2; i + 1 < argc; i += 2) {
			if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
			else if (!strcmp(argv[i], "--name")) name = argv[i + 1];
		}
		server(port, name);
	}
	if (argc >= 2 && !strcmp(argv[1], "client")) return client(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "trace")) return trace(argc - 2, argv + 2);
	fprintf(stderr, "usage: netbench server|client|trace ... (see the comment at the top of harness/bench/native/netbench.c)\n");
	return 2;
}
