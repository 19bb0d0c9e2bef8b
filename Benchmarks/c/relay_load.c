/* Load generator for `netplay-bench relay`: two-player sessions sending inputs through a relay
 * (netplay-sync) or through the plain C forwarder, measuring how many inputs reach the partner
 * and how long they take. Written in C with epoll so the generator costs little next to what it
 * measures; the same program drives both targets.
 * (Over 500 lines as one file on purpose: a self-contained C baseline built with one cc call,
 * sharing no code with what it measures.)
 *
 *   relay_load MODE ENDPOINT ATTACH_FILE SESSIONS RATE WARMUP_S SECONDS WINDOW THREADS
 *
 * MODE relay: ATTACH_FILE holds, per player (session-major, slot 1 then 2), a 4-byte big-endian
 *      length and an AttachRequest envelope (signed tickets, prepared by netplay-bench); every
 *      player attaches and waits for the match to run.
 * MODE forwarder: ATTACH_FILE is "-"; players set routing ids "sNNNNNN-0"/"-1" (the forwarder
 *      pairs ids differing in the last bit).
 * WINDOW 0: every session sends one frame per player at RATE Hz (phases spread evenly);
 * WINDOW n: players send as fast as possible, at most n frames ahead of their partner.
 *
 * Each player is one TCP connection speaking ZMTP 3.1 itself, as a DEALER would (RFC 23 and
 * 37: NULL mechanism, READY with Socket-Type and Identity, PING answered with PONG, and a PING
 * with a 6 s TTL every 2 s, as NetplayKit's libzmq DEALER sends), over a non-blocking socket in
 * the thread's epoll set: a message sent costs one send() and a read brings in whatever frames
 * have arrived. libzmq is not used, so the generator adds no I/O thread and no wake-ups of its
 * own to the machine it shares with the target.
 *
 * Each input is an InputBatch envelope whose 8-byte input is the send time (CLOCK_REALTIME,
 * microseconds, the clock of the kernel's receive stamps). The first time a player sees a
 * partner's frame (forwarded, confirmed, or the forwarder's copy of the batch) counts as one
 * delivery and one latency sample, twice measured: until the kernel received it on the
 * partner's socket (SO_TIMESTAMPNS; the latency figures) and until this generator read it
 * (read_*: adds the generator's own delay, it shares the machine). Prints one line:
 * "sent=N delivered=N received=N errors=N p50_us=X p99_us=X max_us=X read_p50_us=X
 * read_p99_us=X read_max_us=X connection_errors=N". Connection failures (refused, reset, closed by
 * the target, ZMTP errors) are counted there and the first few reported on stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

/* A connection's ZMTP state. */
enum { CONN_GREETING, CONN_HANDSHAKE, CONN_READY, CONN_DEAD };

typedef struct {
    int fd, state;
    uint32_t watching;            /* events registered with epoll */
    unsigned char *in;            /* received bytes not yet parsed (a partial frame) */
    size_t in_size, in_capacity;
    unsigned char *out;           /* bytes the socket did not take yet, from out_start */
    size_t out_start, out_size, out_capacity;
    size_t greeting_unsent;       /* until the target's greeting arrives, only ours is sent */
    int session, slot;
    long next_frame, awaited, partner_seen;
    int running;
    uint64_t next_heartbeat;      /* when this connection PINGs the target next */
    unsigned char *attach;
    size_t attach_size;
} player_t;

typedef struct {
    int index, first_session, sessions;
    player_t *players;
    int epfd;
    int opened, opening;  /* connections opened so far; of those, still awaiting the target's greeting */
    long sent, delivered, errors, received, connection_errors;
    int *heartbeats;              /* ready connections in the order they PING next (a ring) */
    int heartbeat_head, heartbeat_count;
    uint64_t read_time;           /* when the generator read what it is parsing (wall_us) */
    uint32_t *samples;            /* latency to the partner's socket, per delivery */
    uint32_t *read_samples;       /* latency until the generator read it, per delivery */
    size_t sample_count, sample_capacity;
    int failed;
} worker_t;

static const char *mode, *endpoint;
static struct sockaddr_storage target_address;
static socklen_t target_address_size;
static int session_total, window_frames, thread_total;
static double rate;
static volatile int phase;  /* 0 setup, 1 warm-up, 2 measure, 3 stop */
static volatile int ready_threads;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char **attach_messages;
static size_t *attach_sizes;

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Input stamps and arrival times are on the clock the kernel stamps received data with. */
static uint64_t wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static size_t put_varint(unsigned char *out, uint64_t value) {
    size_t n = 0;
    do {
        unsigned char byte = value & 0x7F;
        value >>= 7;
        out[n++] = byte | (value ? 0x80 : 0);
    } while (value);
    return n;
}

static int get_varint(const unsigned char **p, const unsigned char *end, uint64_t *value) {
    uint64_t result = 0;
    int shift = 0;
    while (*p < end && shift < 64) {
        unsigned char byte = *(*p)++;
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) { *value = result; return 1; }
        shift += 7;
    }
    return 0;
}

/* Envelope { input_batch(5) { slot 1, start_frame 2, input_size 3, inputs 4, awaited 5, current 6 } } */
static size_t encode_batch(unsigned char *out, int slot, long frame, long awaited, uint64_t stamp) {
    unsigned char inner[64];
    size_t n = 0;
    inner[n++] = 0x08; n += put_varint(inner + n, (uint64_t)slot);
    inner[n++] = 0x10; n += put_varint(inner + n, (uint64_t)frame);
    inner[n++] = 0x18; n += put_varint(inner + n, 8);
    inner[n++] = 0x22; inner[n++] = 8;
    memcpy(inner + n, &stamp, 8); n += 8;
    inner[n++] = 0x28; n += put_varint(inner + n, (uint64_t)awaited);
    inner[n++] = 0x30; n += put_varint(inner + n, (uint64_t)frame);
    size_t m = 0;
    out[m++] = 0x2A; m += put_varint(out + m, n);
    memcpy(out + m, inner, n);
    return m + n;
}

static uint32_t elapsed_us(uint64_t from, uint64_t to) {
    uint64_t elapsed = to >= from ? to - from : 0;
    return elapsed > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)elapsed;
}

/* `arrival`: when the kernel received the data the partner's inputs came in (wall_us). */
static void record(worker_t *w, player_t *pl, const unsigned char *inputs, size_t size, uint64_t start, uint64_t arrival) {
    size_t count = size / 8;
    for (size_t i = 0; i < count; i++) {
        long frame = (long)(start + i);
        if (frame <= pl->partner_seen) continue;
        pl->partner_seen = frame;
        if (phase != 2) continue;
        uint64_t stamp;
        memcpy(&stamp, inputs + i * 8, 8);
        w->delivered++;
        if (w->sample_count == w->sample_capacity) {
            w->sample_capacity = w->sample_capacity ? w->sample_capacity * 2 : 1 << 16;
            w->samples = realloc(w->samples, w->sample_capacity * sizeof(uint32_t));
            w->read_samples = realloc(w->read_samples, w->sample_capacity * sizeof(uint32_t));
        }
        w->samples[w->sample_count] = elapsed_us(stamp, arrival);
        w->read_samples[w->sample_count++] = elapsed_us(stamp, w->read_time);
    }
}

/* One protobuf field: its number and wire type, its value (varint) or its bytes (length-delimited;
   fixed-width fields are skipped over). */
typedef struct {
    int number, type;
    uint64_t value;
    const unsigned char *bytes;
} field_t;

/* Reads the field at *p: 1 when read, 0 at `end`, -1 on a truncated or unknown-type field. */
static int next_field(const unsigned char **p, const unsigned char *end, field_t *f) {
    uint64_t key;
    if (*p >= end) return 0;
    if (!get_varint(p, end, &key)) return -1;
    f->number = (int)(key >> 3);
    f->type = (int)(key & 7);
    f->bytes = NULL;
    switch (f->type) {
    case 0: return get_varint(p, end, &f->value) ? 1 : -1;
    case 1: if (end - *p < 8) return -1; *p += 8; return 1;
    case 5: if (end - *p < 4) return -1; *p += 4; return 1;
    case 2:
        if (!get_varint(p, end, &f->value) || f->value > (uint64_t)(end - *p)) return -1;
        f->bytes = *p;
        *p += f->value;
        return 1;
    default: return -1;
    }
}

/* PlayerInputs { slot 1, start_frame 2, inputs 3, status 4 } inside InputBroadcast(3). */
static void parse_broadcast(worker_t *w, player_t *pl, const unsigned char *p, const unsigned char *end, uint64_t arrival) {
    int authoritative = 0;
    uint64_t auth_start = 0, auth_count = 0;
    int have_auth_range = 0;
    field_t field, sub_field;
    int read;
    while ((read = next_field(&p, end, &field)) > 0) {
        if (field.type == 0 && field.number == 1) authoritative = (int)field.value;
        if (field.type != 2 || (field.number != 3 && field.number != 6)) continue;  /* players (3) and forwarded (6) */
        const unsigned char *sub = field.bytes, *sub_end = field.bytes + field.value;
        uint64_t slot = 0, start = 0;
        const unsigned char *inputs = NULL;
        size_t inputs_size = 0;
        while (next_field(&sub, sub_end, &sub_field) > 0) {
            if (sub_field.type == 0 && sub_field.number == 1) slot = sub_field.value;
            else if (sub_field.type == 0 && sub_field.number == 2) start = sub_field.value;
            else if (sub_field.type == 2 && sub_field.number == 3) { inputs = sub_field.bytes; inputs_size = (size_t)sub_field.value; }
        }
        if (field.number == 3 && !have_auth_range) { auth_start = start; auth_count = inputs_size / 8; have_auth_range = 1; }
        if ((int)slot != pl->slot + 1 && inputs) record(w, pl, inputs, inputs_size, start, arrival);
    }
    if (read < 0) return;
    if (authoritative && have_auth_range && (long)auth_start <= pl->awaited && (long)(auth_start + auth_count) > pl->awaited)
        pl->awaited = (long)(auth_start + auth_count);
}

static void handle(worker_t *w, player_t *pl, const unsigned char *data, size_t size, uint64_t arrival) {
    const unsigned char *p = data, *end = data + size;
    field_t body, f;
    while (next_field(&p, end, &body) > 0) {
        if (body.type != 2) continue;
        const unsigned char *sub = body.bytes, *sub_end = body.bytes + body.value;
        if (body.number == 6) {
            parse_broadcast(w, pl, sub, sub_end, arrival);
        } else if (body.number == 5) {  /* the forwarder's copy of the partner's InputBatch */
            uint64_t start = 0;
            const unsigned char *inputs = NULL;
            size_t inputs_size = 0;
            while (next_field(&sub, sub_end, &f) > 0) {
                if (f.type == 0 && f.number == 2) start = f.value;
                else if (f.type == 2 && f.number == 4) { inputs = f.bytes; inputs_size = (size_t)f.value; }
            }
            if (inputs) record(w, pl, inputs, inputs_size, start, arrival);
        } else if (body.number == 151) {  /* AttachResponse: running is field 10 */
            while (next_field(&sub, sub_end, &f) > 0) {
                if (f.type == 0 && f.number == 10 && f.value) pl->running = 1;
            }
        } else if (body.number == 2) {
            if (w->errors++ < 3) {  /* say what the first errors were */
                uint64_t code = 0;
                const unsigned char *text = NULL;
                size_t text_size = 0;
                while (next_field(&sub, sub_end, &f) > 0) {
                    if (f.type == 0 && f.number == 1) code = f.value;
                    else if (f.type == 2 && f.number == 2) { text = f.bytes; text_size = (size_t)f.value; }
                }
                fprintf(stderr, "relay_load: error %llu: %.*s\n", (unsigned long long)code, (int)text_size, text ? (const char *)text : "");
            }
        }
    }
}

/* ZMTP 3.1 over one non-blocking TCP socket per player (RFC 23 / RFC 37), as a DEALER that
 * connects to the target's ROUTER: a 64-byte greeting (signature, version 3.1, mechanism NULL,
 * as-server 0), a READY command naming the socket type and the player's routing id, then frames
 * of a flags byte (MORE 1, LONG 2, COMMAND 4), a 1- or 8-byte (big-endian) size and the body. */
enum { FLAG_MORE = 1, FLAG_LONG = 2, FLAG_COMMAND = 4 };
enum { GREETING_SIZE = 64 };
/* Bytes a connection may hold unsent before a send is refused (as a full high-water mark
 * refuses it); the old libzmq generator's HWM was 100,000 messages. */
static const size_t out_limit = 4u << 20;
/* Connections opened at once, awaiting the target's greeting: libzmq listens with a backlog of
 * 100, and connects beyond it are dropped and retried by TCP seconds later. */
static const int opening_limit = 50;
/* Largest frame accepted from the target. */
static const uint64_t frame_limit = 64u << 20;
/* ZMTP heartbeats as a NetplayKit peer's libzmq DEALER sends them (SocketDefaults for connecting
 * sockets): a PING every 2 s from the end of the handshake, whose TTL (tenths of a second) asks
 * the target to drop the connection after 6 s of silence. */
static const uint64_t heartbeat_interval_us = 2000000;
static const unsigned char heartbeat_ttl_deciseconds = 60;

static void player_name(const player_t *pl, char *name, size_t size) {
    snprintf(name, size, "s%06d-%d", pl->session, pl->slot);
}

static void set_watching(worker_t *w, player_t *pl, uint32_t events) {
    if (pl->watching == events) return;
    struct epoll_event event = {.events = events, .data.u32 = (uint32_t)(pl - w->players)};
    epoll_ctl(w->epfd, EPOLL_CTL_MOD, pl->fd, &event);
    pl->watching = events;
}

/* A connection that failed is counted, reported (the first few) and closed; its player stays
 * silent from then on. */
static void connection_failed(worker_t *w, player_t *pl, const char *what, int error) {
    if (pl->state == CONN_DEAD) return;
    if (pl->state == CONN_GREETING) w->opening--;
    if (w->connection_errors++ < 5) {
        char name[32];
        player_name(pl, name, sizeof name);
        fprintf(stderr, "relay_load: player %s: %s%s%s\n", name, what, error ? ": " : "", error ? strerror(error) : "");
    }
    epoll_ctl(w->epfd, EPOLL_CTL_DEL, pl->fd, NULL);
    close(pl->fd);
    pl->fd = -1;
    pl->state = CONN_DEAD;
    pl->out_start = pl->out_size = 0;
    pl->in_size = 0;
}

static void keep_unsent(player_t *pl, const unsigned char *data, size_t size) {
    if (pl->out_start > 0 && pl->out_start == pl->out_size) pl->out_start = pl->out_size = 0;
    if (pl->out_size + size > pl->out_capacity) {
        if (pl->out_start > 0) {  /* move the unsent bytes to the front first */
            memmove(pl->out, pl->out + pl->out_start, pl->out_size - pl->out_start);
            pl->out_size -= pl->out_start;
            pl->out_start = 0;
        }
        while (pl->out_size + size > pl->out_capacity) pl->out_capacity = pl->out_capacity ? pl->out_capacity * 2 : 1024;
        pl->out = realloc(pl->out, pl->out_capacity);
    }
    memcpy(pl->out + pl->out_size, data, size);
    pl->out_size += size;
}

/* The unsent bytes the connection may write now: before the target's greeting has arrived,
 * only what is left of ours. */
static size_t writable(const player_t *pl) {
    size_t unsent = pl->out_size - pl->out_start;
    return pl->state == CONN_GREETING && pl->greeting_unsent < unsent ? pl->greeting_unsent : unsent;
}

/* Writes what the socket will take of the unsent bytes; watches for room while some are left. */
static void flush(worker_t *w, player_t *pl) {
    size_t ready;
    while ((ready = writable(pl)) > 0) {
        ssize_t n = send(pl->fd, pl->out + pl->out_start, ready, MSG_NOSIGNAL);
        if (n > 0) {
            pl->out_start += (size_t)n;
            pl->greeting_unsent -= (size_t)n < pl->greeting_unsent ? (size_t)n : pl->greeting_unsent;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        connection_failed(w, pl, "send", n < 0 ? errno : 0);
        return;
    }
    if (pl->out_start == pl->out_size) pl->out_start = pl->out_size = 0;
    set_watching(w, pl, writable(pl) ? EPOLLIN | EPOLLOUT : EPOLLIN);
}

/* Sends `size` bytes now (one send() when nothing is waiting), keeping what the socket does not
 * take, in order, until it has room. Returns 0 when the connection is gone or too far behind. */
static int send_bytes(worker_t *w, player_t *pl, const unsigned char *data, size_t size) {
    if (pl->state == CONN_DEAD || pl->out_size - pl->out_start > out_limit) return 0;
    if (pl->out_size == pl->out_start && pl->state != CONN_GREETING) {
        ssize_t n;
        do n = send(pl->fd, data, size, MSG_NOSIGNAL); while (n < 0 && errno == EINTR);
        if (n == (ssize_t)size) return 1;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) { connection_failed(w, pl, "send", errno); return 0; }
        if (n > 0) { data += n; size -= (size_t)n; }
        keep_unsent(pl, data, size);
        set_watching(w, pl, EPOLLIN | EPOLLOUT);
        return 1;
    }
    keep_unsent(pl, data, size);
    return 1;
}

static size_t frame_header(unsigned char *header, int flags, size_t size) {
    if (size <= 255) {
        header[0] = (unsigned char)flags;
        header[1] = (unsigned char)size;
        return 2;
    }
    header[0] = (unsigned char)(flags | FLAG_LONG);
    for (int i = 0; i < 8; i++) header[1 + i] = (unsigned char)((uint64_t)size >> (56 - 8 * i));
    return 9;
}

/* One frame: header and body in one send(). */
static int send_frame(worker_t *w, player_t *pl, int flags, const unsigned char *body, size_t size) {
    unsigned char stack[512];
    unsigned char *frame = size + 9 <= sizeof stack ? stack : malloc(size + 9);
    size_t header = frame_header(frame, flags, size);
    memcpy(frame + header, body, size);
    int sent = send_bytes(w, pl, frame, header + size);
    if (frame != stack) free(frame);
    return sent;
}

/* A command frame: name size, name, data. */
static void send_command(worker_t *w, player_t *pl, const char *name, const unsigned char *data, size_t size) {
    unsigned char body[300];
    size_t name_size = strlen(name);
    if (1 + name_size + size > sizeof body) return;
    body[0] = (unsigned char)name_size;
    memcpy(body + 1, name, name_size);
    memcpy(body + 1 + name_size, data, size);
    send_frame(w, pl, FLAG_COMMAND, body, 1 + name_size + size);
}

static size_t put_property(unsigned char *out, const char *name, const void *value, size_t value_size) {
    size_t name_size = strlen(name), n = 0;
    out[n++] = (unsigned char)name_size;
    memcpy(out + n, name, name_size); n += name_size;
    out[n++] = (unsigned char)(value_size >> 24); out[n++] = (unsigned char)(value_size >> 16);
    out[n++] = (unsigned char)(value_size >> 8); out[n++] = (unsigned char)value_size;
    memcpy(out + n, value, value_size);
    return n + value_size;
}

/* Opens the player's connection (the connect completes in the background) with the greeting
 * and READY queued; messages sent before the handshake completes follow them. Only the greeting
 * goes out before the target's greeting has arrived, as libzmq does: a libzmq 4.3 ROUTER (the
 * relay's and the forwarder's) closes a connection whose greeting, READY and a message all
 * arrive in its first read. */
static int open_connection(worker_t *w, player_t *pl) {
    pl->state = CONN_GREETING;  /* until it fails */
    w->opening++;
    pl->fd = socket(target_address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (pl->fd < 0) { connection_failed(w, pl, "socket", errno); return 0; }
    int one = 1;
    setsockopt(pl->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  /* as libzmq does */
    setsockopt(pl->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);  /* arrival times (receive) */
    if (connect(pl->fd, (const struct sockaddr *)&target_address, target_address_size) != 0 && errno != EINPROGRESS) {
        connection_failed(w, pl, "connect", errno);
        return 0;
    }
    pl->watching = EPOLLIN | EPOLLOUT;
    struct epoll_event event = {.events = pl->watching, .data.u32 = (uint32_t)(pl - w->players)};
    epoll_ctl(w->epfd, EPOLL_CTL_ADD, pl->fd, &event);

    unsigned char greeting[GREETING_SIZE] = {0};
    greeting[0] = 0xFF;                  /* signature: FF, 8 bytes of padding, 7F */
    greeting[9] = 0x7F;
    greeting[10] = 3;                    /* version 3.1 */
    greeting[11] = 1;
    memcpy(greeting + 12, "NULL", 4);    /* mechanism, zero-padded to 20 bytes; as-server 0; filler */
    keep_unsent(pl, greeting, sizeof greeting);
    pl->greeting_unsent = sizeof greeting;

    char id[32];
    player_name(pl, id, sizeof id);
    unsigned char ready[128];
    size_t n = 0;
    ready[n++] = 5;
    memcpy(ready + n, "READY", 5); n += 5;
    n += put_property(ready + n, "Socket-Type", "DEALER", 6);
    n += put_property(ready + n, "Identity", id, strlen(id));
    unsigned char header[9];
    size_t header_size = frame_header(header, FLAG_COMMAND, n);
    keep_unsent(pl, header, header_size);
    keep_unsent(pl, ready, n);
    if (pl->attach_size) send_frame(w, pl, 0, pl->attach, pl->attach_size);  /* relay: attach at once */
    return 1;
}

static void handle_command(worker_t *w, player_t *pl, const unsigned char *body, size_t size) {
    if (size < 1 || (size_t)body[0] + 1 > size) { connection_failed(w, pl, "malformed ZMTP command", 0); return; }
    size_t name_size = body[0];
    const char *name = (const char *)body + 1;
    const unsigned char *data = body + 1 + name_size;
    size_t data_size = size - 1 - name_size;
    if (name_size == 5 && memcmp(name, "READY", 5) == 0) {
        if (pl->state == CONN_HANDSHAKE) {
            pl->state = CONN_READY;
            pl->next_heartbeat = now_us() + heartbeat_interval_us;
            int count = w->sessions * 2;
            w->heartbeats[(w->heartbeat_head + w->heartbeat_count++) % count] = (int)(pl - w->players);
        }
    } else if (name_size == 4 && memcmp(name, "PING", 4) == 0) {
        /* PING: a 2-byte TTL, then up to 16 bytes of context that PONG returns. */
        if (data_size >= 2) {
            size_t context = data_size - 2 > 16 ? 16 : data_size - 2;
            send_command(w, pl, "PONG", data + 2, context);
        }
    } else if (name_size == 5 && memcmp(name, "ERROR", 5) == 0) {
        char what[300];
        size_t reason = data_size >= 1 && (size_t)data[0] + 1 <= data_size ? data[0] : 0;
        snprintf(what, sizeof what, "ZMTP ERROR from the target: %.*s", (int)reason, (const char *)data + 1);
        connection_failed(w, pl, what, 0);
    }
    /* PONG, SUBSCRIBE, CANCEL and unknown commands: nothing to do for a DEALER. */
}

/* Parses what has arrived: the target's greeting, then frames. Data frames are envelopes, one
 * per frame (a ROUTER's message reaches a DEALER without its routing frame); a message is
 * counted as received at its last frame. */
static void parse_input(worker_t *w, player_t *pl, uint64_t arrival) {
    unsigned char *p = pl->in;
    size_t at = 0, size = pl->in_size;
    if (pl->state == CONN_GREETING) {
        if (size < GREETING_SIZE) return;
        if (p[0] != 0xFF || !(p[9] & 1) || p[10] < 3 || memcmp(p + 12, "NULL\0", 5) != 0) {
            connection_failed(w, pl, "the target's greeting is not ZMTP 3 with the NULL mechanism", 0);
            return;
        }
        pl->state = CONN_HANDSHAKE;
        w->opening--;
        at = GREETING_SIZE;
        flush(w, pl);  /* READY and whatever was sent meanwhile */
        if (pl->state == CONN_DEAD) return;
    }
    while (size - at >= 2 && pl->state != CONN_DEAD) {
        int flags = p[at];
        size_t header = 2;
        uint64_t length = p[at + 1];
        if (flags & ~(FLAG_MORE | FLAG_LONG | FLAG_COMMAND)) { connection_failed(w, pl, "bad ZMTP frame flags", 0); return; }
        if (flags & FLAG_LONG) {
            if (size - at < 9) break;
            header = 9;
            length = 0;
            for (size_t i = 1; i <= 8; i++) length = length << 8 | p[at + i];
            if (length > frame_limit) { connection_failed(w, pl, "ZMTP frame too large", 0); return; }
        }
        if (size - at < header + length) break;
        const unsigned char *body = p + at + header;
        at += header + (size_t)length;
        if (flags & FLAG_COMMAND) {
            handle_command(w, pl, body, (size_t)length);
        } else if (pl->state != CONN_READY) {
            connection_failed(w, pl, "message before the target's READY", 0);
        } else {
            if (phase == 2 && !(flags & FLAG_MORE)) w->received++;
            handle(w, pl, body, (size_t)length, arrival);
        }
    }
    if (pl->state == CONN_DEAD) return;
    if (at > 0) {
        memmove(p, p + at, size - at);
        pl->in_size = size - at;
    }
}

/* One read of whatever has arrived (the socket is level-triggered: what does not fit now is
 * read on the next round). The kernel stamps the read with the arrival of the newest data in it
 * (SO_TIMESTAMPNS), so the latency figures end where the partner's socket received the input,
 * however long this busy generator took to read it; what a read holds counts as arrived with its
 * newest byte (never earlier than it did). */
static void receive(worker_t *w, player_t *pl) {
    if (pl->state == CONN_DEAD) return;
    if (pl->in_capacity - pl->in_size < 4096) {
        pl->in_capacity = pl->in_capacity ? pl->in_capacity * 2 : 16384;
        pl->in = realloc(pl->in, pl->in_capacity);
    }
    struct iovec space = {.iov_base = pl->in + pl->in_size, .iov_len = pl->in_capacity - pl->in_size};
    union { struct cmsghdr header; unsigned char bytes[CMSG_SPACE(sizeof(struct timespec))]; } control;
    struct msghdr message = {.msg_iov = &space, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof control};
    ssize_t n;
    do n = recvmsg(pl->fd, &message, 0); while (n < 0 && errno == EINTR);
    if (n == 0) { connection_failed(w, pl, "closed by the target", 0); return; }
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK) connection_failed(w, pl, "recv", errno);
        return;
    }
    w->read_time = wall_us();
    uint64_t arrival = w->read_time;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec stamp;
            memcpy(&stamp, CMSG_DATA(c), sizeof stamp);
            arrival = (uint64_t)stamp.tv_sec * 1000000u + (uint64_t)stamp.tv_nsec / 1000u;
        }
    }
    pl->in_size += (size_t)n;
    parse_input(w, pl, arrival);
}

/* PINGs the connections whose heartbeat is due; the queue stays in due order because every
 * connection's next PING is a fixed interval after its last. */
static void send_heartbeats(worker_t *w) {
    int count = w->sessions * 2;
    uint64_t now = now_us();
    while (w->heartbeat_count > 0) {
        player_t *pl = &w->players[w->heartbeats[w->heartbeat_head]];
        if (pl->state == CONN_READY && pl->next_heartbeat > now) return;
        w->heartbeat_head = (w->heartbeat_head + 1) % count;
        w->heartbeat_count--;
        if (pl->state != CONN_READY) continue;  /* the connection failed */
        unsigned char ttl[2] = {0, heartbeat_ttl_deciseconds};
        send_command(w, pl, "PING", ttl, sizeof ttl);
        pl->next_heartbeat += heartbeat_interval_us;
        w->heartbeats[(w->heartbeat_head + w->heartbeat_count++) % count] = (int)(pl - w->players);
    }
}

/* Waits up to `timeout` ms for socket events, serves them, and sends the PINGs due. */
static int serve(worker_t *w, int timeout) {
    struct epoll_event events[512];
    int ready = epoll_wait(w->epfd, events, 512, timeout);
    for (int e = 0; e < ready; e++) {
        player_t *pl = &w->players[events[e].data.u32];
        if (pl->state == CONN_DEAD) continue;
        if (events[e].events & EPOLLOUT) flush(w, pl);
        if (events[e].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) receive(w, pl);
    }
    send_heartbeats(w);
    return ready;
}

/* Frame `frame` of the player's inputs, stamped now: a single short ZMTP frame (flags, size,
 * envelope). Returns its size. */
static size_t put_input(const player_t *pl, long frame, unsigned char *out) {
    size_t size = encode_batch(out + 2, pl->slot + 1, frame, pl->awaited, wall_us());
    out[0] = 0;
    out[1] = (unsigned char)size;
    return size + 2;
}

/* Sends the player's next `count` frames (at most 4) in one send(), as libzmq's I/O thread
 * would have written the messages queued together. */
static void send_inputs(worker_t *w, player_t *pl, int count) {
    unsigned char frames[4 * 96];
    size_t size = 0;
    for (int i = 0; i < count; i++) size += put_input(pl, pl->next_frame + i, frames + size);
    if (send_bytes(w, pl, frames, size)) {
        pl->next_frame += count;
        if (phase == 2) w->sent += count;
    }
}

/* An empty PeerStats (Envelope field 156): the relay drops peers it does not hear from. */
static void send_keepalives(worker_t *w, int count) {
    static const unsigned char keepalive[] = {0xE2, 0x09, 0x00};
    for (int i = 0; i < count; i++) send_frame(w, &w->players[i], 0, keepalive, sizeof keepalive);
}

/* Opens the next players' connections, a few at a time (`opening_limit`). */
static void open_more(worker_t *w, int count) {
    while (w->opening < opening_limit && w->opened < count && !w->failed)
        if (!open_connection(w, &w->players[w->opened++])) w->failed = 1;
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    int count = w->sessions * 2;
    int relay = strcmp(mode, "relay") == 0;
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->heartbeats = calloc((size_t)count, sizeof(int));
    for (int i = 0; i < count; i++) {
        w->players[i].state = CONN_DEAD;  /* not opened (yet) */
        w->players[i].fd = -1;
    }
    open_more(w, count);
    /* Attach (relay) or wait for every handshake and let the target register the routing ids
     * (forwarder). */
    uint64_t deadline = now_us() + 30000000u;
    int waiting = count, dead = 0;
    if (w->failed) {
        waiting = -1;
    } else if (relay) {
        uint64_t next_ping = now_us() + 500000;
        while (waiting > 0 && now_us() < deadline) {
            serve(w, 10);
            open_more(w, count);
            if (now_us() >= next_ping) {
                send_keepalives(w, count);
                next_ping = now_us() + 500000;
            }
            waiting = dead = 0;
            for (int i = 0; i < count; i++) {
                if (!w->players[i].running) waiting++;
                if (w->players[i].state == CONN_DEAD && i < w->opened) dead++;
            }
            if (dead) break;  /* a player whose connection failed cannot attach */
        }
    } else {
        while (waiting > 0 && now_us() < deadline) {
            serve(w, 10);
            open_more(w, count);
            waiting = dead = 0;
            for (int i = 0; i < count; i++) {
                if (w->players[i].state != CONN_READY) waiting++;
                if (w->players[i].state == CONN_DEAD && i < w->opened) dead++;
            }
            if (dead) break;
        }
        uint64_t settled = now_us() + 300000;
        while (waiting == 0 && now_us() < settled) serve(w, 10);
        for (int i = 0; i < count; i++) w->players[i].running = w->players[i].state == CONN_READY;
    }
    if (waiting != 0) {
        if (dead)
            fprintf(stderr, "relay_load: thread %d: %d of %d players lost their connection\n", w->index, dead, count);
        else if (waiting > 0)
            fprintf(stderr, "relay_load: thread %d: %d of %d players not %s after 30 s\n", w->index, waiting, count,
                    relay ? "running" : "connected");
        w->failed = 1;
    }
    pthread_mutex_lock(&lock);
    ready_threads++;
    pthread_mutex_unlock(&lock);
    /* While other threads attach, keep the relay hearing from us (it drops silent peers):
     * a keepalive every half second. */
    uint64_t next_keepalive = 0;
    while (phase == 0) {
        if (relay && now_us() >= next_keepalive) {
            send_keepalives(w, count);
            next_keepalive = now_us() + 500000;
        }
        serve(w, 1);
    }

    uint64_t interval = (uint64_t)(1e6 / rate);
    uint64_t start = now_us() + 1000;
    uint64_t *due = calloc((size_t)w->sessions, sizeof(uint64_t));
    for (int s = 0; s < w->sessions; s++) due[s] = start + (uint64_t)s * interval / (uint64_t)w->sessions;
    int cursor = 0;
    while (phase < 3) {
        uint64_t now = now_us();
        int timeout = 1;
        if (window_frames == 0) {
            while (due[cursor] <= now) {
                send_inputs(w, &w->players[cursor * 2], 1);
                send_inputs(w, &w->players[cursor * 2 + 1], 1);
                due[cursor] += interval;
                cursor = (cursor + 1) % w->sessions;
                now = now_us();
            }
            /* Sleep at least a millisecond: sends due meanwhile go out together (their stamps are
             * taken when sent, so latency figures are unaffected) and the generator does not spin.
             * Anything arriving meanwhile wakes it at once. */
            timeout = 1;
        } else {
            int sent_any = 0;
            for (int i = 0; i < count; i++) {
                player_t *pl = &w->players[i];
                long room = pl->partner_seen + window_frames - pl->next_frame + 1;
                if (room <= 0 || pl->state == CONN_DEAD) continue;
                send_inputs(w, pl, room < 4 ? (int)room : 4);
                sent_any = 1;
            }
            /* Every player waits for its partner: sleep until something arrives instead of
             * spinning, so the generator does not take CPU from the target it measures. */
            timeout = sent_any ? 0 : 1;
        }
        serve(w, timeout);
    }
    free(due);
    for (int i = 0; i < count; i++)
        if (w->players[i].state != CONN_DEAD) close(w->players[i].fd);
    close(w->epfd);
    return NULL;
}

static int compare_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* ENDPOINT is tcp://HOST:PORT (HOST may be a name, an IPv4 address or a bracketed IPv6 one). */
static int resolve_endpoint(const char *text) {
    if (strncmp(text, "tcp://", 6) != 0) { fprintf(stderr, "relay_load: %s is not a tcp:// endpoint\n", text); return 0; }
    char host[256];
    const char *rest = text + 6, *colon = strrchr(rest, ':');
    if (!colon || colon == rest || (size_t)(colon - rest) >= sizeof host) { fprintf(stderr, "relay_load: bad endpoint %s\n", text); return 0; }
    memcpy(host, rest, (size_t)(colon - rest));
    host[colon - rest] = 0;
    char *name = host;
    if (name[0] == '[' && name[strlen(name) - 1] == ']') { name[strlen(name) - 1] = 0; name++; }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *found = NULL;
    int error = getaddrinfo(name, colon + 1, &hints, &found);
    if (error != 0 || !found) { fprintf(stderr, "relay_load: cannot resolve %s: %s\n", text, gai_strerror(error)); return 0; }
    memcpy(&target_address, found->ai_addr, found->ai_addrlen);
    target_address_size = found->ai_addrlen;
    freeaddrinfo(found);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: relay_load relay|forwarder ENDPOINT ATTACH_FILE|- SESSIONS RATE WARMUP_S SECONDS WINDOW THREADS\n");
        return 2;
    }
    mode = argv[1];
    endpoint = argv[2];
    session_total = atoi(argv[4]);
    rate = atof(argv[5]);
    double warmup = atof(argv[6]), seconds = atof(argv[7]);
    window_frames = atoi(argv[8]);
    thread_total = atoi(argv[9]);
    if (session_total < 1 || rate <= 0 || thread_total < 1) { fprintf(stderr, "relay_load: bad arguments\n"); return 2; }
    if (!resolve_endpoint(endpoint)) return 2;
    signal(SIGPIPE, SIG_IGN);

    int players = session_total * 2;
    attach_messages = calloc((size_t)players, sizeof *attach_messages);
    attach_sizes = calloc((size_t)players, sizeof *attach_sizes);
    if (strcmp(mode, "relay") == 0) {
        FILE *file = fopen(argv[3], "rb");
        if (!file) { fprintf(stderr, "relay_load: cannot read %s\n", argv[3]); return 1; }
        for (int i = 0; i < players; i++) {
            unsigned char length[4];
            if (fread(length, 1, 4, file) != 4) { fprintf(stderr, "relay_load: %s is short\n", argv[3]); return 1; }
            size_t size = (size_t)length[0] << 24 | (size_t)length[1] << 16 | (size_t)length[2] << 8 | length[3];
            attach_messages[i] = malloc(size);
            if (fread(attach_messages[i], 1, size, file) != size) { fprintf(stderr, "relay_load: %s is short\n", argv[3]); return 1; }
            attach_sizes[i] = size;
        }
        fclose(file);
    }

    worker_t *workers = calloc((size_t)thread_total, sizeof *workers);
    pthread_t *threads = calloc((size_t)thread_total, sizeof *threads);
    int next = 0;
    for (int t = 0; t < thread_total; t++) {
        worker_t *w = &workers[t];
        w->index = t;
        w->first_session = next;
        w->sessions = session_total / thread_total + (t < session_total % thread_total);
        next += w->sessions;
        w->players = calloc((size_t)w->sessions * 2, sizeof(player_t));
        for (int s = 0; s < w->sessions; s++) {
            for (int slot = 0; slot < 2; slot++) {
                player_t *pl = &w->players[s * 2 + slot];
                pl->session = w->first_session + s;
                pl->slot = slot;
                pl->partner_seen = -1;
                pl->attach = attach_messages[pl->session * 2 + slot];
                pl->attach_size = attach_sizes[pl->session * 2 + slot];
            }
        }
        pthread_create(&threads[t], NULL, worker_main, w);
    }
    uint64_t deadline = now_us() + 60000000u;
    while (ready_threads < thread_total && now_us() < deadline) usleep(10000);
    for (int t = 0; t < thread_total; t++) {
        if (workers[t].failed) { fprintf(stderr, "relay_load: players did not attach\n"); phase = 3; return 1; }
    }
    phase = 1;
    usleep((useconds_t)(warmup * 1e6));
    phase = 2;
    usleep((useconds_t)(seconds * 1e6));
    phase = 3;
    long sent = 0, delivered = 0, errors = 0, received = 0, connection_errors = 0;
    size_t total = 0;
    for (int t = 0; t < thread_total; t++) {
        pthread_join(threads[t], NULL);
        sent += workers[t].sent;
        delivered += workers[t].delivered;
        errors += workers[t].errors;
        received += workers[t].received;
        connection_errors += workers[t].connection_errors;
        total += workers[t].sample_count;
    }
    uint32_t *all = malloc((total ? total : 1) * sizeof(uint32_t));
    uint32_t *all_read = malloc((total ? total : 1) * sizeof(uint32_t));
    size_t at = 0;
    for (int t = 0; t < thread_total; t++) {
        memcpy(all + at, workers[t].samples, workers[t].sample_count * sizeof(uint32_t));
        memcpy(all_read + at, workers[t].read_samples, workers[t].sample_count * sizeof(uint32_t));
        at += workers[t].sample_count;
    }
    if (connection_errors > 0) fprintf(stderr, "relay_load: %ld connections failed\n", connection_errors);
    qsort(all, total, sizeof(uint32_t), compare_u32);
    qsort(all_read, total, sizeof(uint32_t), compare_u32);
    printf("sent=%ld delivered=%ld received=%ld errors=%ld p50_us=%u p99_us=%u max_us=%u read_p50_us=%u read_p99_us=%u "
           "read_max_us=%u connection_errors=%ld\n", sent, delivered, received, errors,
           total ? all[total / 2] : 0, total ? all[total * 99 / 100] : 0, total ? all[total - 1] : 0,
           total ? all_read[total / 2] : 0, total ? all_read[total * 99 / 100] : 0, total ? all_read[total - 1] : 0,
           connection_errors);
    return 0;
}
