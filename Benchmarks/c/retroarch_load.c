/* Load generator for `netplay-bench retroarch`: RetroArch-like sessions (a host and a client
 * piping a netplay stream) through netplay-sync's RetroArch relay, through the plain C TCP
 * forwarder, or straight to each other (the floor), measuring throughput and round trips. Written
 * in C with epoll so the generator costs little next to what it measures; the same program drives
 * every target.
 * (Over 500 lines as one file on purpose: a self-contained C baseline built with one cc call,
 * sharing no code with what it measures.)
 *
 *   retroarch_load tunnel HOST PORT [options]   relay protocol: per session a fake host (control
 *                                              connection, RATS/RATL/RATA, RATP echoed all run
 *                                              long) and a fake client, on HOST:PORT
 *   retroarch_load forward HOST PORT --listen P  clients connect to HOST:PORT (the forwarder),
 *                                              which connects them to this program's own host
 *                                              listener on 127.0.0.1:P
 *   retroarch_load direct [options]             clients connect straight to the host listener
 *
 * Options: --sessions N (100), --seconds T (throughput, 5), --latency-seconds L (5), --warmup W
 * (1, before each measurement), --write-size B (16384), --window B (bytes in flight per direction
 * of a session, 262144), --rate HZ (60).
 *
 * Connections are set up one session at a time (blocking, 5 s timeouts), with TCP_NODELAY as
 * RetroArch sets it. Both ends then speak a stream the relay's netplay meter can follow, as
 * RetroArch would: a 24-byte connection header, then `[u32 command][u32 size][payload]` messages
 * (big-endian). Then, one thread and one epoll set:
 *   1. latency: every session's client sends a 64-byte INPUT message (command 3, 56-byte payload
 *      with its send time) every 1/RATE s (phases spread evenly over the sessions); the host
 *      echoes it at once; the client takes the round trip when it reads the echo (the figure
 *      includes the generator's own delay on the shared cores, as for every target).
 *   2. throughput: both ends of every session write WRITE_SIZE-byte LOAD_SAVESTATE messages
 *      (command 0x42, how RetroArch moves bulk data) as fast as the window allows (the window
 *      keeps the figure about forwarding, not about how deep queues may grow); every byte
 *      received while measuring counts.
 * Prints one line: "sessions=N throughput_mb_s=X received_bytes=N rtt_samples=N rtt_lost=N
 * rtt_p50_us=X rtt_p99_us=X rtt_max_us=X errors=N" (MB = 10^6 bytes, both directions summed).
 * Connection failures during the run are counted and reported on stderr. Exits 1 when the setup
 * fails.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { CMD_INPUT = 0x0003, CMD_LOAD_SAVESTATE = 0x0042 };
enum { HEADER_SIZE = 24, PING_SIZE = 64, PING_PAYLOAD = PING_SIZE - 8 };
enum { KIND_CLIENT, KIND_HOST, KIND_CONTROL };

typedef struct endpoint endpoint_t;

/* One end of a session's stream (or a host's control connection in tunnel mode). */
struct endpoint {
    int fd, kind, session, dead;
    uint32_t watching;
    endpoint_t *partner;          /* the other end of the stream */
    unsigned char *out;           /* queued, not yet written */
    size_t out_start, out_size, out_capacity;
    long long written, received;  /* stream bytes, since the start */
    /* The receive side's framing. */
    size_t header_left;
    unsigned char frame[8];
    size_t frame_have;
    int in_payload;
    uint32_t command, payload_left;
    unsigned char payload[PING_PAYLOAD];
    size_t payload_have;
    unsigned char control[4];     /* a partial RATP on a control connection */
    size_t control_have;
};

static const char *mode;
static const char *target_host = "127.0.0.1", *target_port;
static int listen_port = 0;
static int sessions = 100;
static double tp_seconds = 5, latency_seconds = 5, warmup = 1, rate = 60;
static size_t write_size = 16384, window = 262144;

static endpoint_t *endpoints;     /* per session: [client, host, control] */
static int epfd;
static long errors = 0;
static unsigned char *bulk;       /* one LOAD_SAVESTATE message of write_size bytes */

/* Phases of the run. */
enum { LAT_WARMUP, LAT_MEASURE, LAT_DRAIN, TP_WARMUP, TP_MEASURE, DONE };
static int phase = LAT_WARMUP;
static long long tp_received = 0;
static uint32_t *samples;         /* round trips, ns */
static size_t sample_count, sample_capacity;
static long measured_pings = 0;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put32(unsigned char *p, uint32_t v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void fail(const char *what) {
    fprintf(stderr, "retroarch_load: %s: %s\n", what, errno ? strerror(errno) : "protocol error");
    exit(1);
}

/* ---- Setup (blocking, one session at a time) ---- */

static void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval timeout = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
}

static int connect_to(const char *host, const char *port) {
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *address;
    if (getaddrinfo(host, port, &hints, &address) != 0) fail("cannot resolve the target");
    int fd = socket(address->ai_family, SOCK_STREAM, 0);
    tune(fd);
    if (connect(fd, address->ai_addr, address->ai_addrlen) != 0) fail("cannot connect to the target");
    freeaddrinfo(address);
    return fd;
}

static void write_all(int fd, const void *data, size_t size) {
    const unsigned char *p = data;
    while (size > 0) {
        ssize_t n = send(fd, p, size, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail("setup write");
        p += n;
        size -= (size_t)n;
    }
}

static void read_all(int fd, void *data, size_t size) {
    unsigned char *p = data;
    while (size > 0) {
        ssize_t n = recv(fd, p, size, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) errno = 0;
        if (n <= 0) fail("setup read (closed or timed out)");
        p += n;
        size -= (size_t)n;
    }
}

/* Reads the control message `magic` (of `size` bytes) into `out`, echoing any RATP before it. */
static void read_control(int fd, const char *magic, unsigned char *out, size_t size) {
    for (;;) {
        read_all(fd, out, 4);
        if (memcmp(out, "RATP", 4) == 0) {
            write_all(fd, "RATP", 4);
            continue;
        }
        if (memcmp(out, magic, 4) != 0) {
            errno = 0;
            fail("unexpected control message");
        }
        read_all(fd, out + 4, size - 4);
        return;
    }
}

static int listener = -1;

static void open_listener(void) {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)listen_port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 1024) != 0)
        fail("cannot listen");
    socklen_t size = sizeof address;
    getsockname(listener, (struct sockaddr *)&address, &size);
    listen_port = ntohs(address.sin_port);
}

static int accept_one(void) {
    struct pollfd pfd = {.fd = listener, .events = POLLIN};
    if (poll(&pfd, 1, 5000) != 1) {
        errno = 0;
        fail("no connection reached the host listener within 5 s");
    }
    int fd = accept(listener, NULL, NULL);
    if (fd < 0) fail("accept");
    tune(fd);
    return fd;
}

static void setup_session(int s) {
    endpoint_t *client = &endpoints[3 * s], *host = &endpoints[3 * s + 1], *control = &endpoints[3 * s + 2];
    client->fd = host->fd = control->fd = -1;
    if (strcmp(mode, "tunnel") == 0) {
        unsigned char message[32];
        control->fd = connect_to(target_host, target_port);
        memcpy(message, "RATS", 4);
        memset(message + 4, 0, 12);
        write_all(control->fd, message, 16);
        unsigned char session_id[16];
        read_control(control->fd, "RATS", session_id, 16);
        client->fd = connect_to(target_host, target_port);
        write_all(client->fd, session_id, 16);  /* "RATS" + the session id */
        unsigned char link[16];
        read_control(control->fd, "RATL", link, 16);
        memcpy(message, "RATA", 4);
        memcpy(message + 4, link + 4, 12);
        write_all(control->fd, message, 16);
        read_control(control->fd, "RATA", message, 32);
        if (memcmp(message + 4, link + 4, 12) != 0) {
            errno = 0;
            fail("RATA reply for another link");
        }
        host->fd = connect_to(target_host, target_port);
        write_all(host->fd, link, 16);  /* "RATL" + the link id */
    } else {
        char port[16];
        snprintf(port, sizeof port, "%d", listen_port);
        client->fd = strcmp(mode, "forward") == 0 ? connect_to(target_host, target_port) : connect_to("127.0.0.1", port);
        host->fd = accept_one();
    }
    client->kind = KIND_CLIENT;
    host->kind = KIND_HOST;
    control->kind = KIND_CONTROL;
    client->partner = host;
    host->partner = client;
    client->session = host->session = control->session = s;
    /* RetroArch's connection header, each way (the relay's meter skips it). */
    unsigned char header[HEADER_SIZE] = {'R', 'A', 'N', 'P'};
    write_all(client->fd, header, HEADER_SIZE);
    write_all(host->fd, header, HEADER_SIZE);
    client->written = host->written = HEADER_SIZE;
    client->header_left = host->header_left = HEADER_SIZE;
}

/* ---- Running (non-blocking, epoll) ---- */

static void watch(endpoint_t *e) {
    uint32_t events = EPOLLIN | (e->out_size > 0 ? EPOLLOUT : 0);
    if (events == e->watching || e->dead) return;
    struct epoll_event ev = {.events = events, .data.ptr = e};
    epoll_ctl(epfd, EPOLL_CTL_MOD, e->fd, &ev);
    e->watching = events;
}

static void drop(endpoint_t *e, const char *why) {
    if (e->dead) return;
    if (errors++ < 5) fprintf(stderr, "retroarch_load: session %d %s connection: %s\n", e->session,
                              e->kind == KIND_CLIENT ? "client" : e->kind == KIND_HOST ? "host" : "control", why);
    epoll_ctl(epfd, EPOLL_CTL_DEL, e->fd, NULL);
    close(e->fd);
    e->dead = 1;
}

static void flush(endpoint_t *e) {
    while (e->out_size > 0 && !e->dead) {
        ssize_t n = send(e->fd, e->out + e->out_start, e->out_size, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (errno == EINTR) continue;
            drop(e, strerror(errno));
            return;
        }
        e->written += n;
        e->out_start += (size_t)n;
        e->out_size -= (size_t)n;
    }
    if (e->out_size == 0) e->out_start = 0;
    watch(e);
}

static void queue(endpoint_t *e, const unsigned char *data, size_t size) {
    if (e->dead) return;
    if (e->out_start + e->out_size + size > e->out_capacity) {
        if (e->out_start > 0) {
            memmove(e->out, e->out + e->out_start, e->out_size);
            e->out_start = 0;
        }
        if (e->out_size + size > e->out_capacity) {
            e->out_capacity = (e->out_size + size) * 2;
            e->out = realloc(e->out, e->out_capacity);
        }
    }
    memcpy(e->out + e->out_start + e->out_size, data, size);
    e->out_size += size;
    flush(e);
}

/* Throughput phases: `e` writes bulk messages while its direction's window has room. */
static void fill(endpoint_t *e) {
    if (e->kind == KIND_CONTROL || e->dead) return;
    while (e->out_size == 0 && !e->dead && e->written - e->partner->received < (long long)window) {
        queue(e, bulk, write_size);
    }
}

static void record(uint64_t rtt) {
    if (sample_count == sample_capacity) {
        sample_capacity = sample_capacity ? sample_capacity * 2 : 1 << 16;
        samples = realloc(samples, sample_capacity * sizeof *samples);
    }
    samples[sample_count++] = rtt > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)rtt;
}

/* A whole INPUT message arrived on `e`: the host echoes it, the client times it. */
static void on_input(endpoint_t *e) {
    if (e->payload_have < PING_PAYLOAD) return;
    if (e->kind == KIND_HOST) {
        unsigned char message[PING_SIZE];
        put32(message, CMD_INPUT);
        put32(message + 4, PING_PAYLOAD);
        memcpy(message + 8, e->payload, PING_PAYLOAD);
        queue(e, message, PING_SIZE);
    } else if (e->payload[16]) {  /* sent while measuring */
        uint64_t sent;
        memcpy(&sent, e->payload + 8, 8);
        record(now_ns() - sent);
    }
}

static void consume(endpoint_t *e, const unsigned char *data, size_t size) {
    size_t i = 0;
    while (i < size) {
        if (e->header_left > 0) {
            size_t take = e->header_left < size - i ? e->header_left : size - i;
            e->header_left -= take;
            i += take;
        } else if (!e->in_payload) {
            size_t take = 8 - e->frame_have < size - i ? 8 - e->frame_have : size - i;
            memcpy(e->frame + e->frame_have, data + i, take);
            e->frame_have += take;
            i += take;
            if (e->frame_have == 8) {
                e->frame_have = 0;
                e->command = get32(e->frame);
                e->payload_left = get32(e->frame + 4);
                e->payload_have = 0;
                e->in_payload = e->payload_left > 0;
                if (!e->in_payload && e->command == CMD_INPUT) on_input(e);
            }
        } else {
            size_t take = e->payload_left < size - i ? e->payload_left : size - i;
            if (e->command == CMD_INPUT && e->payload_have < PING_PAYLOAD) {
                size_t keep = PING_PAYLOAD - e->payload_have < take ? PING_PAYLOAD - e->payload_have : take;
                memcpy(e->payload + e->payload_have, data + i, keep);
                e->payload_have += keep;
            }
            e->payload_left -= (uint32_t)take;
            i += take;
            if (e->payload_left == 0) {
                e->in_payload = 0;
                if (e->command == CMD_INPUT) on_input(e);
            }
        }
    }
}

static void on_control(endpoint_t *e, const unsigned char *data, size_t size) {
    for (size_t i = 0; i < size; i++) {
        e->control[e->control_have++] = data[i];
        if (e->control_have < 4) continue;
        e->control_have = 0;
        if (memcmp(e->control, "RATP", 4) == 0) queue(e, (const unsigned char *)"RATP", 4);
        else {
            drop(e, "unexpected control message");
            return;
        }
    }
}

/* One read per readiness (epoll is level-triggered): with the window refilled as bytes arrive,
 * a stream never runs dry, and reading it until it did would starve the clock and the others. */
static void readable(endpoint_t *e) {
    static unsigned char buffer[1 << 16];
    for (;;) {
        ssize_t n = recv(e->fd, buffer, sizeof buffer, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            if (errno == EINTR) continue;
            drop(e, strerror(errno));
            return;
        }
        if (n == 0) {
            drop(e, "closed by the target");
            return;
        }
        if (e->kind == KIND_CONTROL) {
            on_control(e, buffer, (size_t)n);
        } else {
            e->received += n;
            if (phase == TP_MEASURE) tp_received += n;
            consume(e, buffer, (size_t)n);
            if (phase == TP_WARMUP || phase == TP_MEASURE) fill(e->partner);  /* its window has room again */
        }
        return;
    }
}

static int compare(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double percentile_us(double p) {
    if (sample_count == 0) return 0;
    size_t index = (size_t)(p * (double)(sample_count - 1) + 0.5);
    return samples[index] / 1000.0;
}

static void usage(void) {
    fprintf(stderr, "usage: retroarch_load tunnel HOST PORT | forward HOST PORT --listen PORT | direct\n"
                    "       [--sessions N] [--seconds T] [--latency-seconds L] [--warmup W] [--write-size B]\n"
                    "       [--window B] [--rate HZ]\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    mode = argv[1];
    int next = 2;
    if (strcmp(mode, "tunnel") == 0 || strcmp(mode, "forward") == 0) {
        if (argc < 4) usage();
        target_host = argv[2];
        target_port = argv[3];
        next = 4;
    } else if (strcmp(mode, "direct") != 0) usage();
    for (; next < argc; next += 2) {
        if (next + 1 >= argc) usage();
        const char *name = argv[next], *value = argv[next + 1];
        if (strcmp(name, "--sessions") == 0) sessions = atoi(value);
        else if (strcmp(name, "--seconds") == 0) tp_seconds = atof(value);
        else if (strcmp(name, "--latency-seconds") == 0) latency_seconds = atof(value);
        else if (strcmp(name, "--warmup") == 0) warmup = atof(value);
        else if (strcmp(name, "--write-size") == 0) write_size = (size_t)atol(value);
        else if (strcmp(name, "--window") == 0) window = (size_t)atol(value);
        else if (strcmp(name, "--rate") == 0) rate = atof(value);
        else if (strcmp(name, "--listen") == 0) listen_port = atoi(value);
        else usage();
    }
    if (sessions < 1 || write_size < 16 || rate <= 0 || (strcmp(mode, "forward") == 0 && listen_port == 0)) usage();
    signal(SIGPIPE, SIG_IGN);
    struct rlimit files;
    if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
        files.rlim_cur = files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
    }
    bulk = calloc(1, write_size);
    put32(bulk, CMD_LOAD_SAVESTATE);
    put32(bulk + 4, (uint32_t)(write_size - 8));

    endpoints = calloc((size_t)sessions * 3, sizeof *endpoints);
    if (strcmp(mode, "tunnel") != 0) open_listener();
    for (int s = 0; s < sessions; s++) setup_session(s);
    epfd = epoll_create1(0);
    for (int i = 0; i < sessions * 3; i++) {
        endpoint_t *e = &endpoints[i];
        if (e->fd < 0) {
            e->dead = 1;
            continue;
        }
        struct timeval none = {0};
        setsockopt(e->fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
        setsockopt(e->fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
        fcntl(e->fd, F_SETFL, fcntl(e->fd, F_GETFL) | O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = e};
        epoll_ctl(epfd, EPOLL_CTL_ADD, e->fd, &ev);
        e->watching = EPOLLIN;
    }

    /* Latency, then throughput. Session s pings at start + (k + s / sessions) / rate. */
    uint64_t period = (uint64_t)(1e9 / rate);
    uint64_t started = now_ns();
    uint64_t measure_from = started + (uint64_t)(warmup * 1e9);
    uint64_t measure_until = measure_from + (uint64_t)(latency_seconds * 1e9);
    uint64_t *next_ping = malloc((size_t)sessions * sizeof *next_ping);
    for (int s = 0; s < sessions; s++) next_ping[s] = started + period * (uint64_t)s / (uint64_t)sessions;
    uint32_t frame = 0;
    uint64_t phase_end = 0;
    struct epoll_event events[512];
    while (phase != DONE) {
        uint64_t now = now_ns();
        uint64_t wake = now + 100000000u;
        if (phase == LAT_WARMUP && now >= measure_from) phase = LAT_MEASURE;
        if (phase == LAT_MEASURE && now >= measure_until) {
            phase = LAT_DRAIN;  /* wait for the last echoes (at most 1 s) */
            phase_end = now + 1000000000u;
        }
        if (phase == LAT_DRAIN && ((long)sample_count >= measured_pings || now >= phase_end)) {
            phase = TP_WARMUP;
            phase_end = now + (uint64_t)(warmup * 1e9);
            for (int i = 0; i < sessions * 3; i++) fill(&endpoints[i]);
        }
        if (phase == TP_WARMUP && now >= phase_end) {
            phase = TP_MEASURE;
            phase_end = now + (uint64_t)(tp_seconds * 1e9);
            tp_received = 0;
        }
        if (phase == TP_MEASURE && now >= phase_end) {
            phase = DONE;
            tp_seconds = (double)(now - phase_end) / 1e9 + tp_seconds;  /* the time actually measured */
            break;
        }
        if (phase == LAT_WARMUP || phase == LAT_MEASURE) {
            for (int s = 0; s < sessions; s++) {
                if (now < next_ping[s]) {
                    if (next_ping[s] < wake) wake = next_ping[s];
                    continue;
                }
                next_ping[s] += period;
                if (next_ping[s] < wake) wake = next_ping[s];
                endpoint_t *client = &endpoints[3 * s];
                if (client->dead) continue;
                unsigned char message[PING_SIZE] = {0};
                put32(message, CMD_INPUT);
                put32(message + 4, PING_PAYLOAD);
                put32(message + 8, frame++);
                put32(message + 12, (uint32_t)s + 1);  /* a client's input, not the host's */
                uint64_t stamp = now_ns();
                memcpy(message + 16, &stamp, 8);
                message[24] = phase == LAT_MEASURE;
                if (message[24]) measured_pings++;
                queue(client, message, PING_SIZE);
            }
        } else if (phase_end < wake) wake = phase_end;
        now = now_ns();
        int timeout = wake > now ? (int)((wake - now + 999999) / 1000000) : 0;
        int count = epoll_wait(epfd, events, 512, timeout);
        for (int i = 0; i < count; i++) {
            endpoint_t *e = events[i].data.ptr;
            if (e->dead) continue;
            if (events[i].events & EPOLLOUT) {
                flush(e);
                if (phase == TP_WARMUP || phase == TP_MEASURE) fill(e);
            }
            if (!e->dead && (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) readable(e);
        }
    }
    qsort(samples, sample_count, sizeof *samples, compare);
    printf("sessions=%d throughput_mb_s=%.2f received_bytes=%lld rtt_samples=%zu rtt_lost=%ld rtt_p50_us=%.1f "
           "rtt_p99_us=%.1f rtt_max_us=%.1f errors=%ld\n",
           sessions, (double)tp_received / 1e6 / tp_seconds, tp_received, sample_count,
           measured_pings - (long)sample_count, percentile_us(0.50), percentile_us(0.99),
           sample_count ? samples[sample_count - 1] / 1000.0 : 0.0, errors);
    fflush(stdout);
    return 0;
}
