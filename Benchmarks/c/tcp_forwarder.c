/* Baseline for `netplay-bench retroarch`: the plainest possible TCP tunnel, a forwarder that
 * connects every accepted connection to one fixed target and pipes bytes both ways, untouched
 * (a minimal relay server without the tunnel protocol or any parsing).
 *
 *   tcp_forwarder LISTEN_PORT TARGET_HOST TARGET_PORT
 *
 * One thread, one epoll set, non-blocking sockets with TCP_NODELAY (as RetroArch sets them): a
 * readable side is read into its direction's 64 KiB buffer and written at once to the other
 * side; what the other side does not take waits there, and the readable side is not read again
 * until it drained (back-pressure, never a drop). Listens on 127.0.0.1. Prints "ready" once
 * listening and runs until SIGTERM or SIGINT; prints what it forwarded on stderr when it stops.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUFFER_SIZE 65536

typedef struct end end_t;

/* One side of a forwarded pair: its socket and the bytes read from it, not yet written to the
 * partner. */
struct end {
    int fd;
    int connecting;               /* the target side until its connect() completes */
    int dead;                     /* closed; freed after the current batch of events */
    uint32_t watching;            /* events registered with epoll */
    end_t *partner;
    unsigned char *buffer;        /* read from this side, for the partner */
    size_t start, size;
};

static volatile sig_atomic_t stopping = 0;
static int epfd;
static long long forwarded_bytes = 0;
static long pairs_opened = 0, connect_failures = 0;

static void on_signal(int signal_number) {
    (void)signal_number;
    stopping = 1;
}

static void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* What `e` wants to hear: readable while its buffer for the partner is empty and the partner is
 * connected; writable while the partner's buffer for it holds bytes (or its connect is pending). */
static void watch(end_t *e) {
    uint32_t events = 0;
    if (e->connecting) events = EPOLLOUT;
    else {
        if (e->size == 0 && !e->partner->connecting) events |= EPOLLIN;
        if (e->partner->size > 0) events |= EPOLLOUT;
    }
    if (events == e->watching) return;
    struct epoll_event ev = {.events = events, .data.ptr = e};
    epoll_ctl(epfd, EPOLL_CTL_MOD, e->fd, &ev);
    e->watching = events;
}

/* Pairs closed during the current batch of events: later events of the batch may still name
 * them, so they are freed once the batch is done. */
static end_t **graveyard;
static size_t graveyard_size, graveyard_capacity;

static void close_pair(end_t *e) {
    if (e->dead) return;
    end_t *p = e->partner;
    close(e->fd);
    close(p->fd);
    e->dead = p->dead = 1;
    if (graveyard_size == graveyard_capacity) {
        graveyard_capacity = graveyard_capacity ? graveyard_capacity * 2 : 64;
        graveyard = realloc(graveyard, graveyard_capacity * sizeof *graveyard);
    }
    graveyard[graveyard_size++] = e;
}

static void bury(void) {
    for (size_t i = 0; i < graveyard_size; i++) {
        end_t *e = graveyard[i];
        free(e->partner->buffer);
        free(e->partner);
        free(e->buffer);
        free(e);
    }
    graveyard_size = 0;
}

/* Writes what `from` holds to its partner; returns -1 when the partner failed. */
static int flush(end_t *from) {
    end_t *to = from->partner;
    while (from->size > 0) {
        ssize_t n = send(to->fd, from->buffer + from->start, from->size, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            if (errno == EINTR) continue;
            return -1;
        }
        forwarded_bytes += n;
        from->start += (size_t)n;
        from->size -= (size_t)n;
    }
    from->start = 0;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: tcp_forwarder LISTEN_PORT TARGET_HOST TARGET_PORT\n");
        return 2;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGPIPE, SIG_IGN);
    /* A child inherits its parent thread's blocked signals (a Swift process started from a
     * Dispatch thread blocks nearly all of them): unblock the two this program stops on. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    sigprocmask(SIG_UNBLOCK, &stop_signals, NULL);
    struct rlimit files;
    if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
        files.rlim_cur = files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
    }

    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *target;
    if (getaddrinfo(argv[2], argv[3], &hints, &target) != 0) {
        fprintf(stderr, "tcp_forwarder: cannot resolve %s:%s\n", argv[2], argv[3]);
        return 1;
    }
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 1024) != 0) {
        fprintf(stderr, "tcp_forwarder: cannot listen on port %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    epfd = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(epfd, EPOLL_CTL_ADD, listener, &ev);
    printf("ready\n");
    fflush(stdout);

    struct epoll_event events[256];
    while (!stopping) {
        int count = epoll_wait(epfd, events, 256, 100);
        for (int i = 0; i < count; i++) {
            end_t *e = events[i].data.ptr;
            if (e == NULL) {  /* the listener: accept everything waiting */
                for (;;) {
                    int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK);
                    if (fd < 0) break;
                    int out = socket(target->ai_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
                    tune(fd);
                    tune(out);
                    if (connect(out, target->ai_addr, target->ai_addrlen) != 0 && errno != EINPROGRESS) {
                        connect_failures++;
                        close(fd);
                        close(out);
                        continue;
                    }
                    end_t *client = calloc(1, sizeof *client), *server = calloc(1, sizeof *server);
                    client->fd = fd;
                    server->fd = out;
                    server->connecting = 1;
                    client->partner = server;
                    server->partner = client;
                    client->buffer = malloc(BUFFER_SIZE);
                    server->buffer = malloc(BUFFER_SIZE);
                    client->watching = 0;  /* nothing until the target side is connected */
                    server->watching = EPOLLOUT;
                    struct epoll_event cev = {.events = 0, .data.ptr = client};
                    struct epoll_event sev = {.events = EPOLLOUT, .data.ptr = server};
                    epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &cev);
                    epoll_ctl(epfd, EPOLL_CTL_ADD, out, &sev);
                    pairs_opened++;
                }
                continue;
            }
            if (e->dead) continue;
            end_t *p = e->partner;
            int failed = 0;
            if (e->connecting) {
                int error = 0;
                socklen_t size = sizeof error;
                getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &error, &size);
                if (error != 0) {
                    connect_failures++;
                    close_pair(e);
                    continue;
                }
                e->connecting = 0;
                watch(e);
                watch(p);
                continue;
            }
            if (events[i].events & (EPOLLOUT | EPOLLERR)) {
                if (flush(p) < 0) failed = 1;
            }
            if (!failed && (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && e->size == 0) {
                ssize_t n = recv(e->fd, e->buffer, BUFFER_SIZE, 0);
                if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) failed = 1;
                else if (n > 0) {
                    e->start = 0;
                    e->size = (size_t)n;
                    if (flush(e) < 0) failed = 1;
                }
            }
            if (failed) {  /* either side closed or failed: close both */
                close_pair(e);
                continue;
            }
            watch(e);
            watch(p);
        }
        bury();
    }
    fprintf(stderr, "tcp_forwarder: %ld connections, %lld bytes forwarded, %ld connect failures\n",
            pairs_opened, forwarded_bytes, connect_failures);
    freeaddrinfo(target);
    close(listener);
    return 0;
}
