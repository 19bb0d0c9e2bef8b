// Linux's epoll (and accept4, pipe2, tcp_info's byte counts) for Swift: Glibc's module map leaves <sys/epoll.h> out.
// Used by RetroArchRelay's tunnel thread (TunnelServer.swift) and NetplayService's inbound and outbound guards.
#ifndef CEPOLL_H
#define CEPOLL_H
#ifdef __linux__
#include <sys/epoll.h>
#include <sys/socket.h>

/// accept4(fd, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC).
int cepoll_accept(int fd, struct sockaddr *address, socklen_t *length);
/// pipe2(fds, O_NONBLOCK | O_CLOEXEC).
int cepoll_pipe(int fds[2]);

/// Bytes the kernel received on TCP socket `fd` so far (tcp_info's tcpi_bytes_received, which
/// <netinet/tcp.h> leaves out), or -1 when `fd` is no TCP socket.
long long cepoll_tcp_bytes_received(int fd);
/// Bytes the peer of TCP socket `fd` acknowledged so far (tcp_info's tcpi_bytes_acked), or -1
/// when `fd` is no TCP socket.
long long cepoll_tcp_bytes_acked(int fd);
/// Bytes waiting in TCP socket `fd`'s receive queue, not read yet (SIOCINQ), or -1.
long long cepoll_tcp_unread_bytes(int fd);
/// Bytes in TCP socket `fd`'s send queue: written, not yet acknowledged by the peer (SIOCOUTQ), or -1.
long long cepoll_tcp_unacknowledged_bytes(int fd);

/// The token stored with a watched descriptor (epoll_data_t is a union Swift reads awkwardly).
static inline unsigned long long cepoll_token(const struct epoll_event *event) { return event->data.u64; }
static inline void cepoll_set_token(struct epoll_event *event, unsigned long long token) { event->data.u64 = token; }
#endif /* __linux__ */
#endif
