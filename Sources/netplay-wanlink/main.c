// netplay-wanlink: joins two TUN devices and holds every IP packet for a one-way delay
// (plus uniform jitter) before writing it to the other device, so a network namespace behind
// one TUN device sees a WAN-like path to the other. Packets keep their order per direction
// unless --reorder is given. Optional loss inside the forwarder (--loss-percent) for machines
// without iptables; the WAN harness drops with iptables' statistic match instead.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define QUEUE_LIMIT 65536
#define MAX_PACKET 65536
#define MAX_DELAY_MS 60000.0

static const char *usage =
    "usage: netplay-wanlink --inner DEV --outer DEV [options]\n"
    "Forwards IP packets between two TUN devices, holding each for a delay.\n"
    "  --inner DEV          TUN device on the peer's side (up = inner -> outer)   NETPLAY_WANLINK_INNER\n"
    "  --outer DEV          TUN device on the services' side (down = outer -> inner) NETPLAY_WANLINK_OUTER\n"
    "  --inner-netns NAME   open --inner inside network namespace NAME (/run/netns/NAME) NETPLAY_WANLINK_INNER_NETNS\n"
    "  --delay-ms MS        one-way delay, each direction (default 0)          NETPLAY_WANLINK_DELAY_MS\n"
    "  --jitter-ms MS       uniform jitter +/- MS on every packet (default 0)  NETPLAY_WANLINK_JITTER_MS\n"
    "  --up-delay-ms MS     delay inner -> outer (overrides --delay-ms)        NETPLAY_WANLINK_UP_DELAY_MS\n"
    "  --down-delay-ms MS   delay outer -> inner (overrides --delay-ms)        NETPLAY_WANLINK_DOWN_DELAY_MS\n"
    "  --loss-percent P     drop P%% of packets each direction in the forwarder NETPLAY_WANLINK_LOSS_PERCENT\n"
    "  --reorder            let jitter reorder packets (default: keep order)   NETPLAY_WANLINK_REORDER=1\n"
    "  --no-reorder         keep order, whatever NETPLAY_WANLINK_REORDER says\n"
    "  --seed N             random seed for jitter and loss (default: time)    NETPLAY_WANLINK_SEED\n"
    "  --watch-pid PID      exit when process PID is gone                      NETPLAY_WANLINK_WATCH_PID\n"
    "  --help               this text\n"
    "A flag beats its variable; an empty variable counts as unset. --delay-ms given as a flag\n"
    "also beats the per-direction variables.\n"
    "Devices are attached by name (IFF_TUN|IFF_NO_PI) and created when missing.\n"
    "SIGTERM or SIGINT (or --watch-pid gone): exit 0 after printing packet counts on stderr;\n"
    "a device that goes away: the same, exit 1.\n";

/// A held packet: when it is due, and its bytes.
typedef struct {
    uint64_t due;
    uint64_t order;
    uint32_t length;
    unsigned char *bytes;
} Held;

/// One direction: a min-heap of held packets by (due, order), its delay and loss, and counts.
typedef struct {
    const char *name;
    Held *heap;
    size_t count;
    uint64_t delay_ns;
    double loss;
    uint64_t last_due;
    uint64_t next_order;
    uint64_t received, forwarded, lost, overflowed, write_failed;
} Direction;

static volatile sig_atomic_t stop_requested = 0;
static void on_signal(int signo) { (void)signo; stop_requested = 1; }

static uint64_t rng_state;
static uint64_t next_random(void) {
    // xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}
/// Uniform in [0, 1).
static double unit_random(void) { return (double)(next_random() >> 11) / 9007199254740992.0; }

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int bad_config(const char *fmt, const char *value) {
    fprintf(stderr, "netplay-wanlink: ");
    fprintf(stderr, fmt, value);
    fprintf(stderr, " (see --help)\n");
    return 2;
}

/// Parses a millisecond or percent figure in [0, max]; 0 on success.
static int parse_number(const char *text, double max, double *out) {
    if (text == NULL || *text == '\0') return -1;
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !isfinite(value) || value < 0 || value > max) return -1;
    *out = value;
    return 0;
}

static int open_tun(const char *name) {
    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

static int heap_less(const Held *a, const Held *b) {
    return a->due < b->due || (a->due == b->due && a->order < b->order);
}

static void heap_push(Direction *d, Held item) {
    size_t i = d->count++;
    d->heap[i] = item;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap_less(&d->heap[i], &d->heap[parent])) break;
        Held t = d->heap[i]; d->heap[i] = d->heap[parent]; d->heap[parent] = t;
        i = parent;
    }
}

static Held heap_pop(Direction *d) {
    Held top = d->heap[0];
    d->heap[0] = d->heap[--d->count];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < d->count && heap_less(&d->heap[l], &d->heap[m])) m = l;
        if (r < d->count && heap_less(&d->heap[r], &d->heap[m])) m = r;
        if (m == i) break;
        Held t = d->heap[i]; d->heap[i] = d->heap[m]; d->heap[m] = t;
        i = m;
    }
    return top;
}

/// Reads every packet waiting on `fd` into direction `d`. Returns -1 when the device is gone.
static int take_packets(int fd, Direction *d, uint64_t jitter_ns, int reorder, unsigned char *buffer) {
    for (int batch = 0; batch < 256; batch++) {
        ssize_t n = read(fd, buffer, MAX_PACKET);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) return 0;
            return -1;
        }
        if (n == 0) return 0;
        uint64_t arrival = now_ns();
        d->received++;
        if (d->loss > 0 && unit_random() < d->loss) { d->lost++; continue; }
        if (d->count >= QUEUE_LIMIT) { d->overflowed++; continue; }
        int64_t offset = 0;
        if (jitter_ns > 0) offset = (int64_t)((unit_random() * 2.0 - 1.0) * (double)jitter_ns);
        int64_t hold = (int64_t)d->delay_ns + offset;
        if (hold < 0) hold = 0;
        uint64_t due = arrival + (uint64_t)hold;
        if (!reorder && due < d->last_due) due = d->last_due;
        d->last_due = due;
        unsigned char *copy = malloc((size_t)n);
        if (copy == NULL) { d->overflowed++; continue; }
        memcpy(copy, buffer, (size_t)n);
        heap_push(d, (Held){ .due = due, .order = d->next_order++, .length = (uint32_t)n, .bytes = copy });
    }
    return 0;
}

/// Writes every due packet of `d` to `fd`.
static void release_due(int fd, Direction *d, uint64_t now) {
    while (d->count > 0 && d->heap[0].due <= now) {
        Held item = heap_pop(d);
        ssize_t n = write(fd, item.bytes, item.length);
        if (n == (ssize_t)item.length) d->forwarded++; else d->write_failed++;
        free(item.bytes);
    }
}

/// The variable `name`, or NULL when it is unset or empty.
static const char *setting(const char *name) {
    const char *value = getenv(name);
    return value != NULL && *value != '\0' ? value : NULL;
}

static const char *option_value(int argc, char **argv, int *i, const char *flag) {
    size_t len = strlen(flag);
    if (strncmp(argv[*i], flag, len) == 0 && argv[*i][len] == '=') return argv[*i] + len + 1;
    if (strcmp(argv[*i], flag) == 0) {
        if (*i + 1 >= argc) return NULL;
        return argv[++*i];
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *inner = setting("NETPLAY_WANLINK_INNER");
    const char *outer = setting("NETPLAY_WANLINK_OUTER");
    const char *inner_netns = setting("NETPLAY_WANLINK_INNER_NETNS");
    const char *delay_text = setting("NETPLAY_WANLINK_DELAY_MS");
    const char *jitter_text = setting("NETPLAY_WANLINK_JITTER_MS");
    const char *up_text = setting("NETPLAY_WANLINK_UP_DELAY_MS");
    const char *down_text = setting("NETPLAY_WANLINK_DOWN_DELAY_MS");
    const char *loss_text = setting("NETPLAY_WANLINK_LOSS_PERCENT");
    const char *seed_text = setting("NETPLAY_WANLINK_SEED");
    const char *watch_text = setting("NETPLAY_WANLINK_WATCH_PID");
    const char *reorder_text = setting("NETPLAY_WANLINK_REORDER");
    int reorder = 0;
    if (reorder_text != NULL) {
        if (strcmp(reorder_text, "1") == 0 || strcmp(reorder_text, "true") == 0) reorder = 1;
        else if (strcmp(reorder_text, "0") != 0 && strcmp(reorder_text, "false") != 0)
            return bad_config("NETPLAY_WANLINK_REORDER '%s' is not 1, true, 0 or false", reorder_text);
    }

    static const char *const valued[] = {"--inner", "--outer", "--inner-netns", "--delay-ms", "--jitter-ms",
                                         "--up-delay-ms", "--down-delay-ms", "--loss-percent", "--seed",
                                         "--watch-pid"};
    const char **targets[] = {&inner, &outer, &inner_netns, &delay_text, &jitter_text, &up_text, &down_text,
                              &loss_text, &seed_text, &watch_text};
    int up_from_flag = 0, down_from_flag = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) { fputs(usage, stdout); return 0; }
        if (strcmp(argv[i], "--reorder") == 0) { reorder = 1; continue; }
        if (strcmp(argv[i], "--no-reorder") == 0) { reorder = 0; continue; }
        int matched = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) {
            size_t len = strlen(valued[k]);
            if (strncmp(argv[i], valued[k], len) != 0 || (argv[i][len] != '\0' && argv[i][len] != '=')) continue;
            const char *value = option_value(argc, argv, &i, valued[k]);
            if (value == NULL) return bad_config("%s needs a value", valued[k]);
            *targets[k] = value;
            // A general delay from the command line beats per-direction ones from variables.
            if (targets[k] == &delay_text) {
                if (!up_from_flag) up_text = NULL;
                if (!down_from_flag) down_text = NULL;
            }
            if (targets[k] == &up_text) up_from_flag = 1;
            if (targets[k] == &down_text) down_from_flag = 1;
            matched = 1;
            break;
        }
        if (!matched) return bad_config("unknown argument '%s'", argv[i]);
    }

    if (inner == NULL || *inner == '\0') return bad_config("%s", "--inner DEV is required");
    if (outer == NULL || *outer == '\0') return bad_config("%s", "--outer DEV is required");
    if (strlen(inner) >= IFNAMSIZ) return bad_config("inner device name '%s' is longer than 15 characters", inner);
    if (strlen(outer) >= IFNAMSIZ) return bad_config("outer device name '%s' is longer than 15 characters", outer);
    if (strcmp(inner, outer) == 0 && (inner_netns == NULL || *inner_netns == '\0'))
        return bad_config("--inner and --outer are the same device '%s'", inner);
    if (inner_netns != NULL && (*inner_netns == '\0' || strchr(inner_netns, '/') != NULL))
        return bad_config("--inner-netns '%s' is not a namespace name", inner_netns ? inner_netns : "");

    double delay = 0, jitter = 0, up = -1, down = -1, loss = 0;
    if (delay_text && parse_number(delay_text, MAX_DELAY_MS, &delay) != 0)
        return bad_config("--delay-ms '%s' is not a number of milliseconds in 0...60000", delay_text);
    if (jitter_text && parse_number(jitter_text, MAX_DELAY_MS, &jitter) != 0)
        return bad_config("--jitter-ms '%s' is not a number of milliseconds in 0...60000", jitter_text);
    if (up_text && parse_number(up_text, MAX_DELAY_MS, &up) != 0)
        return bad_config("--up-delay-ms '%s' is not a number of milliseconds in 0...60000", up_text);
    if (down_text && parse_number(down_text, MAX_DELAY_MS, &down) != 0)
        return bad_config("--down-delay-ms '%s' is not a number of milliseconds in 0...60000", down_text);
    if (loss_text && parse_number(loss_text, 100.0, &loss) != 0)
        return bad_config("--loss-percent '%s' is not a percentage in 0...100", loss_text);
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    if (seed_text) {
        char *end = NULL;
        errno = 0;
        unsigned long long value = strtoull(seed_text, &end, 10);
        if (errno != 0 || end == seed_text || *end != '\0' || seed_text[0] == '-')
            return bad_config("--seed '%s' is not a non-negative integer", seed_text);
        seed = value;
    }
    long watch_pid = 0;
    if (watch_text) {
        char *end = NULL;
        errno = 0;
        watch_pid = strtol(watch_text, &end, 10);
        if (errno != 0 || end == watch_text || *end != '\0' || watch_pid <= 0 || watch_pid > INT_MAX)
            return bad_config("--watch-pid '%s' is not a process id", watch_text);
    }
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
    if (rng_state == 0) rng_state = 1;

    Direction directions[2];
    memset(directions, 0, sizeof directions);
    directions[0].name = "up";
    directions[1].name = "down";
    directions[0].delay_ns = (uint64_t)((up >= 0 ? up : delay) * 1e6 + 0.5);
    directions[1].delay_ns = (uint64_t)((down >= 0 ? down : delay) * 1e6 + 0.5);
    directions[0].loss = directions[1].loss = loss / 100.0;
    uint64_t jitter_ns = (uint64_t)(jitter * 1e6 + 0.5);

    int outer_fd = open_tun(outer);
    if (outer_fd < 0) {
        fprintf(stderr, "netplay-wanlink: cannot attach TUN device %s: %s\n", outer, strerror(errno));
        return 1;
    }
    if (inner_netns != NULL) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "/run/netns/%s", inner_netns);
        int ns = open(path, O_RDONLY | O_CLOEXEC);
        if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) {
            fprintf(stderr, "netplay-wanlink: cannot enter network namespace %s: %s\n", inner_netns, strerror(errno));
            return 1;
        }
        close(ns);
    }
    int inner_fd = open_tun(inner);
    if (inner_fd < 0) {
        fprintf(stderr, "netplay-wanlink: cannot attach TUN device %s: %s\n", inner, strerror(errno));
        return 1;
    }
    for (int k = 0; k < 2; k++) {
        directions[k].heap = malloc(sizeof(Held) * QUEUE_LIMIT);
        if (directions[k].heap == NULL) { fprintf(stderr, "netplay-wanlink: out of memory\n"); return 1; }
    }

    // SIGTERM/SIGINT are blocked except inside ppoll, so a signal always ends a wait promptly.
    sigset_t blocked, wait_mask;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGTERM);
    sigaddset(&blocked, SIGINT);
    sigprocmask(SIG_BLOCK, &blocked, &wait_mask);
    sigdelset(&wait_mask, SIGTERM);
    sigdelset(&wait_mask, SIGINT);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);

    fprintf(stderr, "netplay-wanlink: %s <-> %s up %.3f ms down %.3f ms jitter %.3f ms loss %.2f%%%s\n", inner, outer,
            directions[0].delay_ns / 1e6, directions[1].delay_ns / 1e6, jitter, loss, reorder ? " reorder" : "");

    unsigned char *buffer = malloc(MAX_PACKET);
    if (buffer == NULL) { fprintf(stderr, "netplay-wanlink: out of memory\n"); return 1; }
    int fds[2] = {inner_fd, outer_fd};  // direction k reads fds[k] and writes fds[1 - k]
    int status = 0;
    uint64_t next_watch = now_ns();
    while (!stop_requested) {
        uint64_t now = now_ns();
        if (watch_pid > 0 && now >= next_watch) {
            if (kill((pid_t)watch_pid, 0) != 0 && errno == ESRCH) break;
            next_watch = now + 500000000ULL;
        }
        uint64_t wake = watch_pid > 0 ? next_watch : now + 1000000000ULL;
        for (int k = 0; k < 2; k++)
            if (directions[k].count > 0 && directions[k].heap[0].due < wake) wake = directions[k].heap[0].due;
        struct timespec timeout = {0, 0};
        if (wake > now) {
            uint64_t wait = wake - now;
            timeout.tv_sec = (time_t)(wait / 1000000000ULL);
            timeout.tv_nsec = (long)(wait % 1000000000ULL);
        }
        struct pollfd pfd[2] = {{inner_fd, POLLIN, 0}, {outer_fd, POLLIN, 0}};
        int ready = ppoll(pfd, 2, &timeout, &wait_mask);
        if (ready < 0 && errno != EINTR) {
            fprintf(stderr, "netplay-wanlink: poll failed: %s\n", strerror(errno));
            status = 1;
            break;
        }
        int gone = 0;
        for (int k = 0; k < 2 && ready > 0; k++) {
            if (pfd[k].revents & (POLLERR | POLLHUP | POLLNVAL)) gone = 1;
            if ((pfd[k].revents & POLLIN) && take_packets(fds[k], &directions[k], jitter_ns, reorder, buffer) != 0)
                gone = 1;
        }
        if (gone) {
            fprintf(stderr, "netplay-wanlink: a TUN device went away; stopping\n");
            status = 1;
            break;
        }
        now = now_ns();
        for (int k = 0; k < 2; k++) release_due(fds[1 - k], &directions[k], now);
    }
    for (int k = 0; k < 2; k++) {
        Direction *d = &directions[k];
        fprintf(stderr,
                "netplay-wanlink: %s: received %llu forwarded %llu lost %llu queue-full %llu write-failed %llu held %zu\n",
                d->name, (unsigned long long)d->received, (unsigned long long)d->forwarded, (unsigned long long)d->lost,
                (unsigned long long)d->overflowed, (unsigned long long)d->write_failed, d->count);
    }
    return status;
}
