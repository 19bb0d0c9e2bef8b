/* Baseline for `netplay-bench zeromq`: the same two measurements made with libzmq directly.
 *   zmq_bench lat  SIZE COUNT   -> round-trip latency (DEALER <-> ROUTER echo over tcp loopback)
 *   zmq_bench thr  SIZE COUNT   -> one-way throughput (PUSH -> PULL over tcp loopback)
 * Each side runs on its own thread with its own socket, as the Swift benchmark does.
 * Prints one line: "lat_us=<mean round trip in microseconds>" or "thr_msgs=<messages per second>".
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

static void *ctx;
static char endpoint[256];
static size_t msg_size;
static long msg_count;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    fprintf(stderr, "zmq_bench: %s: %s\n", what, zmq_strerror(zmq_errno()));
    exit(1);
}

static void *echo_server(void *arg) {
    void *router = arg;
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    for (long i = 0; i < msg_count; i++) {
        if (zmq_msg_recv(&id, router, 0) < 0 || zmq_msg_recv(&body, router, 0) < 0) die("echo recv");
        if (zmq_msg_send(&id, router, ZMQ_SNDMORE) < 0 || zmq_msg_send(&body, router, 0) < 0) die("echo send");
    }
    zmq_msg_close(&id);
    zmq_msg_close(&body);
    return NULL;
}

static void *pusher(void *arg) {
    (void)arg;
    void *push = zmq_socket(ctx, ZMQ_PUSH);
    if (!push || zmq_connect(push, endpoint) != 0) die("push connect");
    char *buffer = calloc(1, msg_size);
    for (long i = 0; i < msg_count; i++)
        if (zmq_send(push, buffer, msg_size, 0) < 0) die("push send");
    free(buffer);
    zmq_close(push);
    return NULL;
}

static void latency(void) {
    void *router = zmq_socket(ctx, ZMQ_ROUTER);
    if (!router || zmq_bind(router, "tcp://127.0.0.1:*") != 0) die("router bind");
    size_t len = sizeof endpoint;
    zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, endpoint, &len);
    void *dealer = zmq_socket(ctx, ZMQ_DEALER);
    if (!dealer || zmq_connect(dealer, endpoint) != 0) die("dealer connect");
    pthread_t thread;
    pthread_create(&thread, NULL, echo_server, router);
    char *buffer = calloc(1, msg_size);
    /* One unmeasured round trip so connection set-up is not timed. */
    msg_count += 1;
    if (zmq_send(dealer, buffer, msg_size, 0) < 0 || zmq_recv(dealer, buffer, msg_size, 0) < 0) die("warm-up");
    double start = now_seconds();
    for (long i = 0; i < msg_count - 1; i++) {
        if (zmq_send(dealer, buffer, msg_size, 0) < 0) die("dealer send");
        if (zmq_recv(dealer, buffer, msg_size, 0) < 0) die("dealer recv");
    }
    double elapsed = now_seconds() - start;
    pthread_join(thread, NULL);
    printf("lat_us=%.3f\n", elapsed * 1e6 / (double)(msg_count - 1));
    free(buffer);
    zmq_close(dealer);
    zmq_close(router);
}

static void throughput(void) {
    void *pull = zmq_socket(ctx, ZMQ_PULL);
    if (!pull || zmq_bind(pull, "tcp://127.0.0.1:*") != 0) die("pull bind");
    size_t len = sizeof endpoint;
    zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, endpoint, &len);
    pthread_t thread;
    pthread_create(&thread, NULL, pusher, NULL);
    char *buffer = calloc(1, msg_size);
    if (zmq_recv(pull, buffer, msg_size, 0) < 0) die("pull recv");
    double start = now_seconds(); /* timed from the first message, like libzmq's local_thr */
    for (long i = 1; i < msg_count; i++)
        if (zmq_recv(pull, buffer, msg_size, 0) < 0) die("pull recv");
    double elapsed = now_seconds() - start;
    pthread_join(thread, NULL);
    printf("thr_msgs=%.0f\n", (double)(msg_count - 1) / elapsed);
    free(buffer);
    zmq_close(pull);
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[1], "lat") != 0 && strcmp(argv[1], "thr") != 0)) {
        fprintf(stderr, "usage: zmq_bench lat|thr SIZE COUNT\n");
        return 2;
    }
    msg_size = (size_t)atol(argv[2]);
    msg_count = atol(argv[3]);
    if (msg_size == 0 || msg_count < 2) {
        fprintf(stderr, "zmq_bench: SIZE must be > 0 and COUNT > 1\n");
        return 2;
    }
    ctx = zmq_ctx_new();
    if (strcmp(argv[1], "lat") == 0) latency(); else throughput();
    zmq_ctx_term(ctx);
    return 0;
}
