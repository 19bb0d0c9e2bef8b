/* Baseline for `netplay-bench relay`: the plainest possible relay, a libzmq ROUTER that
 * forwards every message it receives to the sender's partner, untouched.
 *
 *   relay_forwarder ENDPOINT
 *
 * Peers set their routing id; a peer's partner is the peer whose id differs only in the last
 * byte's lowest bit ("s00042a" <-> "s00042b"), which is how the benchmark names the two
 * players of a session. Messages to a partner that is not connected (or whose queue is full)
 * are dropped, never blocking. One thread, one socket, like the Swift relay's reactor. Prints
 * "ready" once bound and runs until SIGTERM or SIGINT.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

static volatile sig_atomic_t stopping = 0;

static void on_signal(int signal_number) {
    (void)signal_number;
    stopping = 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: relay_forwarder ENDPOINT\n");
        return 2;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    /* A child inherits its parent thread's blocked signals (a Swift process started from a
     * Dispatch thread blocks nearly all of them): unblock the two this program stops on. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    sigprocmask(SIG_UNBLOCK, &stop_signals, NULL);
    void *ctx = zmq_ctx_new();
    void *router = zmq_socket(ctx, ZMQ_ROUTER);
    int hwm = 10000, linger = 0, timeout = 100;
    zmq_setsockopt(router, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(router, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(router, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    if (zmq_bind(router, argv[1]) != 0) {
        fprintf(stderr, "relay_forwarder: cannot bind %s: %s\n", argv[1], zmq_strerror(zmq_errno()));
        return 1;
    }
    printf("ready\n");
    fflush(stdout);

    zmq_msg_t identity, payload;
    zmq_msg_init(&identity);
    zmq_msg_init(&payload);
    unsigned char partner[256];
    long forwarded = 0, dropped = 0;
    while (!stopping) {
        if (zmq_msg_recv(&identity, router, 0) < 0) continue;  /* timeout: check the stop flag */
        if (!zmq_msg_more(&identity) || zmq_msg_recv(&payload, router, 0) < 0) continue;
        while (zmq_msg_more(&payload)) zmq_msg_recv(&payload, router, 0);  /* ignore extra frames */
        size_t size = zmq_msg_size(&identity);
        if (size == 0 || size > sizeof partner) continue;
        memcpy(partner, zmq_msg_data(&identity), size);
        partner[size - 1] ^= 1;
        if (zmq_send(router, partner, size, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
            dropped++;
            continue;
        }
        if (zmq_msg_send(&payload, router, ZMQ_DONTWAIT) < 0) dropped++;
        else forwarded++;
    }
    fprintf(stderr, "relay_forwarder: forwarded %ld, dropped %ld\n", forwarded, dropped);
    zmq_msg_close(&identity);
    zmq_msg_close(&payload);
    zmq_close(router);
    zmq_ctx_term(ctx);
    return 0;
}
