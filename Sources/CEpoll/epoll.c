// Linux only (the RetroArch tunnel's epoll loop, the inbound guard's byte counts); empty elsewhere.
// accept4 and pipe2 need _GNU_SOURCE, which Swift's Glibc import does not define.
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include "CEpoll.h"

#ifdef __linux__

int cepoll_accept(int fd, struct sockaddr *address, socklen_t *length) {
    return accept4(fd, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int cepoll_pipe(int fds[2]) {
    return pipe2(fds, O_NONBLOCK | O_CLOEXEC);
}

// Fills `info` for TCP socket `fd`; false when it is none or the kernel's tcp_info ends before
// `needed` bytes (an older kernel without the field asked for).
static int tcp_info_of(int fd, struct tcp_info *info, size_t needed) {
    socklen_t length = sizeof *info;
    return getsockopt(fd, IPPROTO_TCP, TCP_INFO, info, &length) == 0 && length >= needed;
}

#define TCP_INFO_END(field) (offsetof(struct tcp_info, field) + sizeof(((struct tcp_info *)0)->field))

long long cepoll_tcp_bytes_received(int fd) {
    struct tcp_info info;
    return tcp_info_of(fd, &info, TCP_INFO_END(tcpi_bytes_received)) ? (long long)info.tcpi_bytes_received : -1;
}

long long cepoll_tcp_bytes_acked(int fd) {
    struct tcp_info info;
    return tcp_info_of(fd, &info, TCP_INFO_END(tcpi_bytes_acked)) ? (long long)info.tcpi_bytes_acked : -1;
}

long long cepoll_tcp_unread_bytes(int fd) {
    int unread = 0;
    if (ioctl(fd, SIOCINQ, &unread) != 0) return -1;
    return unread;
}

long long cepoll_tcp_unacknowledged_bytes(int fd) {
    int queued = 0;
    if (ioctl(fd, SIOCOUTQ, &queued) != 0) return -1;
    return queued;
}
#endif /* __linux__ */
