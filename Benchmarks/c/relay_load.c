/* Load generator for `netplay-bench relay`: two-player sessions sending inputs through a relay
 * (netplay-sync) or through the plain C forwarder, measuring how many inputs reach the partner
 * and how long they take. Written in C with epoll so the generator costs little next to what it
 * measures; the same program drives both targets.
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
 * Each input is an InputBatch envelope whose 8-byte input is the send time (CLOCK_MONOTONIC,
 * microseconds). The first time a player sees a partner's frame (forwarded, confirmed, or the
 * forwarder's copy of the batch) counts as one delivery and one latency sample. Prints one line:
 * "sent=N delivered=N errors=N p50_us=X p99_us=X max_us=X".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

typedef struct {
    void *socket;
    int session, slot;
    long next_frame, awaited, partner_seen;
    int running;
    unsigned char *attach;
    size_t attach_size;
} player_t;

typedef struct {
    int index, first_session, sessions;
    player_t *players;
    long sent, delivered, errors, received;
    uint32_t *samples;
    size_t sample_count, sample_capacity;
    int failed;
} worker_t;

static const char *mode, *endpoint;
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

static void record(worker_t *w, player_t *pl, const unsigned char *inputs, size_t size, uint64_t start, uint64_t now) {
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
        }
        uint64_t latency = now >= stamp ? now - stamp : 0;
        w->samples[w->sample_count++] = latency > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)latency;
    }
}

/* PlayerInputs { slot 1, start_frame 2, inputs 3, status 4 } inside InputBroadcast(3). */
static void parse_broadcast(worker_t *w, player_t *pl, const unsigned char *p, const unsigned char *end, uint64_t now) {
    int authoritative = 0;
    uint64_t auth_start = 0, auth_count = 0;
    int have_auth_range = 0;
    while (p < end) {
        uint64_t key, value;
        if (!get_varint(&p, end, &key)) return;
        int field = (int)(key >> 3), type = (int)(key & 7);
        if (type == 0) {
            if (!get_varint(&p, end, &value)) return;
            if (field == 1) authoritative = (int)value;
        } else if (type == 2) {
            if (!get_varint(&p, end, &value) || value > (uint64_t)(end - p)) return;
            const unsigned char *sub = p, *sub_end = p + value;
            p = sub_end;
            if (field != 3 && field != 6) continue;  /* players (3) and forwarded (6) */
            uint64_t slot = 0, start = 0;
            const unsigned char *inputs = NULL;
            size_t inputs_size = 0;
            while (sub < sub_end) {
                uint64_t k, v;
                if (!get_varint(&sub, sub_end, &k)) break;
                int f = (int)(k >> 3), t = (int)(k & 7);
                if (t == 0) {
                    if (!get_varint(&sub, sub_end, &v)) break;
                    if (f == 1) slot = v; else if (f == 2) start = v;
                } else if (t == 2) {
                    if (!get_varint(&sub, sub_end, &v) || v > (uint64_t)(sub_end - sub)) break;
                    if (f == 3) { inputs = sub; inputs_size = (size_t)v; }
                    sub += v;
                } else break;
            }
            if (field == 3 && !have_auth_range) { auth_start = start; auth_count = inputs_size / 8; have_auth_range = 1; }
            if ((int)slot != pl->slot + 1 && inputs) record(w, pl, inputs, inputs_size, start, now);
        } else return;
    }
    if (authoritative && have_auth_range && (long)auth_start <= pl->awaited && (long)(auth_start + auth_count) > pl->awaited)
        pl->awaited = (long)(auth_start + auth_count);
}

static void handle(worker_t *w, player_t *pl, const unsigned char *data, size_t size, uint64_t now) {
    const unsigned char *p = data, *end = data + size;
    while (p < end) {
        uint64_t key, value;
        if (!get_varint(&p, end, &key)) return;
        int field = (int)(key >> 3), type = (int)(key & 7);
        if (type == 0) { if (!get_varint(&p, end, &value)) return; continue; }
        if (type != 2 || !get_varint(&p, end, &value) || value > (uint64_t)(end - p)) return;
        const unsigned char *sub = p, *sub_end = p + value;
        p = sub_end;
        if (field == 6) {
            parse_broadcast(w, pl, sub, sub_end, now);
        } else if (field == 5) {  /* the forwarder's copy of the partner's InputBatch */
            uint64_t start = 0;
            const unsigned char *inputs = NULL;
            size_t inputs_size = 0;
            while (sub < sub_end) {
                uint64_t k, v;
                if (!get_varint(&sub, sub_end, &k)) break;
                int f = (int)(k >> 3), t = (int)(k & 7);
                if (t == 0) { if (!get_varint(&sub, sub_end, &v)) break; if (f == 2) start = v; }
                else if (t == 2) {
                    if (!get_varint(&sub, sub_end, &v) || v > (uint64_t)(sub_end - sub)) break;
                    if (f == 4) { inputs = sub; inputs_size = (size_t)v; }
                    sub += v;
                } else break;
            }
            if (inputs) record(w, pl, inputs, inputs_size, start, now);
        } else if (field == 151) {  /* AttachResponse: running is field 10 */
            while (sub < sub_end) {
                uint64_t k, v;
                if (!get_varint(&sub, sub_end, &k)) break;
                int t = (int)(k & 7);
                if (t == 0) { if (!get_varint(&sub, sub_end, &v)) break; if ((k >> 3) == 10 && v) pl->running = 1; }
                else if (t == 2) { if (!get_varint(&sub, sub_end, &v) || v > (uint64_t)(sub_end - sub)) break; sub += v; }
                else if (t == 1) sub += 8;
                else if (t == 5) sub += 4;
                else break;
            }
        } else if (field == 2) {
            if (w->errors++ < 3) {  /* say what the first errors were */
                uint64_t code = 0;
                const unsigned char *text = NULL;
                size_t text_size = 0;
                while (sub < sub_end) {
                    uint64_t k, v;
                    if (!get_varint(&sub, sub_end, &k)) break;
                    if ((k & 7) == 0) { if (!get_varint(&sub, sub_end, &v)) break; if ((k >> 3) == 1) code = v; }
                    else if ((k & 7) == 2) {
                        if (!get_varint(&sub, sub_end, &v) || v > (uint64_t)(sub_end - sub)) break;
                        if ((k >> 3) == 2) { text = sub; text_size = (size_t)v; }
                        sub += v;
                    } else break;
                }
                fprintf(stderr, "relay_load: error %llu: %.*s\n", (unsigned long long)code, (int)text_size, text ? (const char *)text : "");
            }
        }
    }
}

static void drain(worker_t *w, player_t *pl) {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    for (int budget = 0; budget < 256; budget++) {
        if (zmq_msg_recv(&msg, pl->socket, ZMQ_DONTWAIT) < 0) break;
        if (phase == 2) w->received++;
        handle(w, pl, zmq_msg_data(&msg), zmq_msg_size(&msg), now_us());
    }
    zmq_msg_close(&msg);
}

static void send_input(worker_t *w, player_t *pl) {
    unsigned char buffer[96];
    size_t size = encode_batch(buffer, pl->slot + 1, pl->next_frame, pl->awaited, now_us());
    if (zmq_send(pl->socket, buffer, size, ZMQ_DONTWAIT) == (int)size) {
        pl->next_frame++;
        if (phase == 2) w->sent++;
    }
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    void *ctx = zmq_ctx_new();
    int count = w->sessions * 2;
    zmq_ctx_set(ctx, ZMQ_MAX_SOCKETS, count + 64);
    int epfd = epoll_create1(0);
    for (int i = 0; i < count; i++) {
        player_t *pl = &w->players[i];
        pl->socket = zmq_socket(ctx, ZMQ_DEALER);
        int hwm = 100000, linger = 0;
        zmq_setsockopt(pl->socket, ZMQ_SNDHWM, &hwm, sizeof hwm);
        zmq_setsockopt(pl->socket, ZMQ_RCVHWM, &hwm, sizeof hwm);
        zmq_setsockopt(pl->socket, ZMQ_LINGER, &linger, sizeof linger);
        char id[32];
        int id_size = snprintf(id, sizeof id, "s%06d-%d", pl->session, pl->slot);
        zmq_setsockopt(pl->socket, ZMQ_ROUTING_ID, id, (size_t)id_size);
        if (zmq_connect(pl->socket, endpoint) != 0) { w->failed = 1; break; }
        int fd;
        size_t fd_size = sizeof fd;
        zmq_getsockopt(pl->socket, ZMQ_FD, &fd, &fd_size);
        struct epoll_event event = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event);
    }
    /* Attach (relay) or let connections settle (forwarder). */
    if (strcmp(mode, "relay") == 0) {
        for (int i = 0; i < count; i++)
            zmq_send(w->players[i].socket, w->players[i].attach, w->players[i].attach_size, 0);
        uint64_t deadline = now_us() + 30000000u;
        int waiting = count;
        uint64_t next_ping = now_us() + 500000;
        while (waiting > 0 && now_us() < deadline) {
            struct epoll_event events[256];
            epoll_wait(epfd, events, 256, 10);
            if (now_us() >= next_ping) {
                static const unsigned char keepalive[] = {0xE2, 0x09, 0x00};
                for (int i = 0; i < count; i++) zmq_send(w->players[i].socket, keepalive, sizeof keepalive, ZMQ_DONTWAIT);
                next_ping = now_us() + 500000;
            }
            waiting = 0;
            for (int i = 0; i < count; i++) {
                drain(w, &w->players[i]);
                if (!w->players[i].running) waiting++;
            }
        }
        if (waiting > 0) {
            fprintf(stderr, "relay_load: thread %d: %d of %d players not running after 30 s\n", w->index, waiting, count);
            w->failed = 1;
        }
    } else {
        usleep(300000);
        for (int i = 0; i < count; i++) w->players[i].running = 1;
    }
    pthread_mutex_lock(&lock);
    ready_threads++;
    pthread_mutex_unlock(&lock);
    /* While other threads attach, keep the relay hearing from us (it drops silent peers):
     * an empty PeerStats (Envelope field 156) every half second. */
    static const unsigned char keepalive[] = {0xE2, 0x09, 0x00};
    uint64_t next_keepalive = 0;
    while (phase == 0) {
        if (strcmp(mode, "relay") == 0 && now_us() >= next_keepalive) {
            for (int i = 0; i < count; i++) {
                zmq_send(w->players[i].socket, keepalive, sizeof keepalive, ZMQ_DONTWAIT);
                drain(w, &w->players[i]);
            }
            next_keepalive = now_us() + 500000;
        }
        usleep(1000);
    }

    uint64_t interval = (uint64_t)(1e6 / rate);
    uint64_t start = now_us() + 1000;
    uint64_t *due = calloc((size_t)w->sessions, sizeof(uint64_t));
    for (int s = 0; s < w->sessions; s++) due[s] = start + (uint64_t)s * interval / (uint64_t)w->sessions;
    int cursor = 0;
    struct epoll_event events[512];
    while (phase < 3) {
        uint64_t now = now_us();
        int timeout = 1;
        if (window_frames == 0) {
            while (due[cursor] <= now) {
                player_t *a = &w->players[cursor * 2], *b = &w->players[cursor * 2 + 1];
                send_input(w, a);
                send_input(w, b);
                drain(w, a);
                drain(w, b);
                due[cursor] += interval;
                cursor = (cursor + 1) % w->sessions;
                now = now_us();
            }
            /* Sleep at least a millisecond: sends due meanwhile go out together (their stamps are
             * taken when sent, so latency figures are unaffected) and the generator does not spin. */
            timeout = 1;
        } else {
            int sent_any = 0;
            for (int i = 0; i < count; i++) {
                player_t *pl = &w->players[i];
                int sent = 0;
                while (pl->next_frame <= pl->partner_seen + window_frames && sent < 4) { send_input(w, pl); sent++; }
                if (sent) { drain(w, pl); sent_any = 1; }
            }
            /* Every player waits for its partner: sleep until something arrives instead of
             * spinning, so the generator does not take CPU from the target it measures. */
            timeout = sent_any ? 0 : 1;
        }
        int ready = epoll_wait(epfd, events, 512, timeout);
        for (int e = 0; e < ready; e++) drain(w, &w->players[events[e].data.u32]);
        /* ZMQ_FD is edge-like (a send can consume the wake-up of a message that is waiting):
         * after a quiet millisecond look at every socket once. */
        if (ready == 0 && timeout > 0 && window_frames > 0)
            for (int i = 0; i < count; i++) drain(w, &w->players[i]);
    }
    free(due);
    for (int i = 0; i < count; i++) zmq_close(w->players[i].socket);
    close(epfd);
    zmq_ctx_term(ctx);
    return NULL;
}

static int compare_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
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
    long sent = 0, delivered = 0, errors = 0, received = 0;
    size_t total = 0;
    for (int t = 0; t < thread_total; t++) {
        pthread_join(threads[t], NULL);
        sent += workers[t].sent;
        delivered += workers[t].delivered;
        errors += workers[t].errors;
        received += workers[t].received;
        total += workers[t].sample_count;
    }
    uint32_t *all = malloc((total ? total : 1) * sizeof(uint32_t));
    size_t at = 0;
    for (int t = 0; t < thread_total; t++) {
        memcpy(all + at, workers[t].samples, workers[t].sample_count * sizeof(uint32_t));
        at += workers[t].sample_count;
    }
    qsort(all, total, sizeof(uint32_t), compare_u32);
    printf("sent=%ld delivered=%ld received=%ld errors=%ld p50_us=%u p99_us=%u max_us=%u\n", sent, delivered, received, errors,
           total ? all[total / 2] : 0, total ? all[total * 99 / 100] : 0, total ? all[total - 1] : 0);
    return 0;
}
